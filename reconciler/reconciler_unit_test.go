package reconciler

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestBackoff(t *testing.T) {
	tests := []struct {
		lasted   time.Duration
		min, max time.Duration
	}{
		{0, 5 * time.Second, 6 * time.Second},
		{3 * time.Second, 5 * time.Second, 6 * time.Second},
		{20 * time.Second, 20 * time.Second, 24 * time.Second},
		{time.Hour, time.Minute, 72 * time.Second},
	}
	for _, tt := range tests {
		for range 20 {
			if got := backoff(tt.lasted); got < tt.min || got > tt.max {
				t.Errorf("backoff after a conflict of %v = %v, want within [%v, %v]", tt.lasted, got, tt.min, tt.max)
			}
		}
	}
}

// TestDropStatusFields: the cache keeps an owned object's managedFields but
// those of status writes of status fields only; a status write that also
// set metadata, and a scale subresource's entry (an autoscaler's replicas),
// stay.
func TestDropStatusFields(t *testing.T) {
	o := &unstructured.Unstructured{}
	o.SetManagedFields([]metav1.ManagedFieldsEntry{
		{Manager: "stencil", Operation: metav1.ManagedFieldsOperationApply},
		{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:replicas":{}}}`)},
		{Manager: "annotator", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:annotations":{"f:x":{}}},"f:status":{}}`)},
		{Manager: "hpa", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "scale"},
	})
	out := dropStatusFields(o)
	var got []string
	for _, e := range out.(*unstructured.Unstructured).GetManagedFields() {
		got = append(got, e.Manager)
	}
	if !slices.Equal(got, []string{"stencil", "annotator", "hpa"}) {
		t.Errorf("managers kept %v, want [stencil annotator hpa]", got)
	}
}
