package reconciler

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

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

// TestInternMetadata: the cache's transform leaves an owned object's
// labels and annotations as they were, and two objects that carry the
// same key or value (decoded apart, so each had its own bytes; transformed
// between the same two collections) then hold one copy of it; a long
// annotation is left as it is; a tombstone passes as it is.
func TestInternMetadata(t *testing.T) {
	// fresh is s in bytes of its own, as a decoder makes it.
	fresh := strings.Clone
	labels := func() map[string]string {
		return map[string]string{fresh("app.kubernetes.io/name"): fresh("web"), fresh("stencil.dev/owner-uid"): fresh("0b6f5a3e")}
	}
	typed := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: labels(), Annotations: map[string]string{fresh("stencil.dev/owner"): fresh("MyWeb/ns/web")}}}
	u := &unstructured.Unstructured{}
	u.SetLabels(labels())
	for _, obj := range []metav1.Object{typed, u} {
		if internMetadata(obj) != any(obj) {
			t.Fatalf("internMetadata returned another object than %T", obj)
		}
	}
	if want := labels(); !maps.Equal(typed.GetLabels(), want) || !maps.Equal(u.GetLabels(), want) {
		t.Errorf("labels %v and %v, want %v", typed.GetLabels(), u.GetLabels(), want)
	}
	if got := typed.GetAnnotations(); !maps.Equal(got, map[string]string{"stencil.dev/owner": "MyWeb/ns/web"}) {
		t.Errorf("annotations %v", got)
	}
	for k, v := range typed.GetLabels() {
		for k2, v2 := range u.GetLabels() {
			if k == k2 && (unsafe.StringData(k) != unsafe.StringData(k2) || unsafe.StringData(v) != unsafe.StringData(v2)) {
				t.Errorf("label %s=%s: the two objects hold two copies", k, v)
			}
		}
	}
	long := strings.Repeat("x", internedMax+1)
	big := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"a": long}}}
	internMetadata(big)
	if got := big.Annotations["a"]; unsafe.StringData(got) != unsafe.StringData(long) {
		t.Errorf("an annotation of %d bytes was copied", len(long))
	}
	tombstone := cache.DeletedFinalStateUnknown{Key: "ns/web", Obj: typed}
	if got := internMetadata(tombstone); got != any(tombstone) {
		t.Errorf("a tombstone came back as %v", got)
	}
}
