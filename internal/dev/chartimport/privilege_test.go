package chartimport

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestPrivilege: every type that grants access, admits requests, serves
// the API or is cluster-scoped is called privileged, not RBAC's only.
func TestPrivilege(t *testing.T) {
	for gk, want := range map[schema.GroupKind]bool{
		{Group: "rbac.authorization.k8s.io", Kind: "Role"}:                            true,
		{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}: true,
		{Group: "apiregistration.k8s.io", Kind: "APIService"}:                         true,
		{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                           true,
		{Kind: "Namespace"}:                 true,
		{Kind: "ConfigMap"}:                 false,
		{Group: "apps", Kind: "Deployment"}: false,
	} {
		if got := privilege(gk) != ""; got != want {
			t.Errorf("privilege(%s) says %v, want %v", gk, got, want)
		}
	}
}
