package render

import "testing"

func TestJudgesHealth(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		ref  TypeRef
		want bool
	}{
		{TypeRef{APIVersion: "apps/v1", Kind: "Deployment"}, true},
		{TypeRef{APIVersion: "apps/v1", Kind: "StatefulSet"}, true},
		{TypeRef{APIVersion: "v1", Kind: "PersistentVolumeClaim"}, true},
		{TypeRef{APIVersion: "batch/v1", Kind: "Job"}, true},
		{TypeRef{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"}, true},
		{TypeRef{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"}, true},
		{TypeRef{APIVersion: "cert-manager.io/v1", Kind: "Certificate"}, true}, // a custom resource
		{TypeRef{APIVersion: "v1", Kind: "ConfigMap"}, false},
		{TypeRef{APIVersion: "v1", Kind: "Service"}, false},
		{TypeRef{APIVersion: "batch/v1", Kind: "CronJob"}, false},
		{TypeRef{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"}, false},
		{TypeRef{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"}, false},
		{TypeRef{APIVersion: "v1", Kind: "Service", Health: &yes}, true},
		{TypeRef{APIVersion: "apps/v1", Kind: "Deployment", Health: &no}, false},
		{TypeRef{APIVersion: "cert-manager.io/v1", Kind: "Certificate", Health: &no}, false},
	}
	for _, tt := range tests {
		if got := tt.ref.JudgesHealth(); got != tt.want {
			t.Errorf("%s %s (health %v): JudgesHealth() = %v, want %v", tt.ref.APIVersion, tt.ref.Kind, tt.ref.Health, got, tt.want)
		}
	}
}

// TestPlural: a kind's resource name is its regular plural (Person:
// persons, where controller-gen's inflection tables say people), and a
// built-in type's is Kubernetes' (NetworkPolicy: networkpolicies, not
// networkpolicys; Gateway: gateways, not gatewaies).
func TestPlural(t *testing.T) {
	for kind, want := range map[string]string{
		"Widget": "widgets", "Policy": "policies", "NetworkPolicy": "networkpolicies", "Gateway": "gateways",
		"Box": "boxes", "Class": "classes", "IngressClass": "ingressclasses", "Ingress": "ingresses", "Batch": "batches",
		"Wish": "wishes", "Memcached": "memcacheds", "Proxy": "proxies", "Person": "persons", "Y": "ys",
		"Endpoints": "endpoints", "EndpointSlice": "endpointslices", "HTTPRoute": "httproutes",
	} {
		if got := Plural(kind); got != want {
			t.Errorf("Plural(%q) = %q, want %q", kind, got, want)
		}
		if got := (TypeRef{Kind: kind}).PluralResource(); got != want {
			t.Errorf("TypeRef{Kind: %q}.PluralResource() = %q, want %q", kind, got, want)
		}
	}
}
