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
