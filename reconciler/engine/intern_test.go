package engine

import (
	"maps"
	"runtime"
	"strings"
	"testing"
	"unique"
	"unsafe"

	"github.com/stencil-operator/stencil/internal/testing/testutil"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
)

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
	// The canonical strings live while a handle does: a collection between
	// the two transforms would otherwise give the second object new copies.
	held := []unique.Handle[string]{unique.Make("app.kubernetes.io/name"), unique.Make("web"), unique.Make("stencil.dev/owner-uid"), unique.Make("0b6f5a3e")}
	defer runtime.KeepAlive(held)
	typed := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: labels(), Annotations: map[string]string{fresh("stencil.dev/owner"): fresh("MyWeb/ns/web")}}}
	u := &unstructured.Unstructured{}
	u.SetLabels(labels())
	for _, obj := range []metav1.Object{typed, u} {
		if InternMetadata(obj) != any(obj) {
			t.Fatalf("InternMetadata returned another object than %T", obj)
		}
	}
	if want := labels(); !maps.Equal(typed.GetLabels(), want) || !maps.Equal(u.GetLabels(), want) {
		t.Errorf("labels %v and %v, want %v", typed.GetLabels(), u.GetLabels(), want)
	}
	if got := typed.GetAnnotations(); !maps.Equal(got, map[string]string{"stencil.dev/owner": "MyWeb/ns/web"}) {
		t.Errorf("annotations %v", got)
	}
	if copied := testutil.CopiedTwice(typed.GetLabels(), u.GetLabels()); len(copied) > 0 {
		t.Errorf("labels %v: the two objects hold two copies", copied)
	}
	long := strings.Repeat("x", internedMax+1)
	big := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"a": long}}}
	InternMetadata(big)
	if got := big.Annotations["a"]; unsafe.StringData(got) != unsafe.StringData(long) {
		t.Errorf("an annotation of %d bytes was copied", len(long))
	}
	tombstone := cache.DeletedFinalStateUnknown{Key: "ns/web", Obj: typed}
	if got := InternMetadata(tombstone); got != any(tombstone) {
		t.Errorf("a tombstone came back as %v", got)
	}
}
