package reconciler

import (
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
	"github.com/stencil-operator/stencil/render"
)

// TestUnwatched: a reload is refused when the new templates need a watch
// or a whole cached type the running controller lacks; a type no longer
// needed, or a template edit alone, is fine.
func TestUnwatched(t *testing.T) {
	kind := func(t *testing.T, declaration string) *render.Kind {
		t.Helper()
		k, err := render.Load(render.Definition{
			GroupVersionKind: testv1alpha1.GroupVersion.WithKind("Gadget"),
			New:              func() v1alpha1.Object { return &testv1alpha1.Gadget{} },
			Templates: fstest.MapFS{
				"_kind.yaml": {Data: []byte(declaration)},
				"cm.yaml":    {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n")},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	const current = "owns: [{apiVersion: v1, kind: ConfigMap}, {apiVersion: v1, kind: Secret}]\nobserves: [{apiVersion: v1, kind: Pod}]\n"
	tests := map[string]struct {
		// next is the reloaded _kind.yaml.
		next string
		// refused names what the refusal says; empty: accepted.
		refused string
	}{
		"the same declaration":        {next: current},
		"a type no longer owned":      {next: "owns: [{apiVersion: v1, kind: ConfigMap}]\nobserves: [{apiVersion: v1, kind: Pod}]\n"},
		"owns a Service it did not":   {next: "owns: [{apiVersion: v1, kind: ConfigMap}, {apiVersion: v1, kind: Secret}, {apiVersion: v1, kind: Service}]\nobserves: [{apiVersion: v1, kind: Pod}]\n", refused: "it owns Service"},
		"observes Events too":         {next: "owns: [{apiVersion: v1, kind: ConfigMap}, {apiVersion: v1, kind: Secret}]\nobserves: [{apiVersion: v1, kind: Pod}, {apiVersion: v1, kind: Event}]\n", refused: "it observes Event"},
		"reads a metadata-only whole": {next: "owns: [{apiVersion: v1, kind: ConfigMap, status: true}, {apiVersion: v1, kind: Secret}]\nobserves: [{apiVersion: v1, kind: Pod}]\n", refused: "it reads ConfigMap whole"},
		// What is served, rendered and pruned was worked out at start-up
		// from whether each type is optional.
		"a type made optional": {next: "owns: [{apiVersion: v1, kind: ConfigMap}, {apiVersion: v1, kind: Secret, optional: true}]\nobserves: [{apiVersion: v1, kind: Pod}]\n", refused: "whether Secret is optional changed"},
	}
	cur := kind(t, current)
	types := cachedTypesOf([]*render.Kind{cur}, runtime.NewScheme())
	if types.Whole[schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}] {
		t.Fatal("the current kind's ConfigMaps are cached whole; the test needs them metadata only")
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			err := unwatched(cur, kind(t, tt.next), types)
			switch {
			case tt.refused == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.refused != "" && (err == nil || !strings.Contains(err.Error(), tt.refused)):
				t.Errorf("got %v, want a refusal that says %q", err, tt.refused)
			}
		})
	}
}

// TestStillWaits: templates that no longer need a type the kind waits for
// (required, not served) are refused: the running controller would go on
// saying the kind needs it.
func TestStillWaits(t *testing.T) {
	gizmo := schema.GroupVersionKind{Group: "missing.stencil.dev", Version: "v1", Kind: "Gizmo"}
	next, err := render.Load(render.Definition{
		GroupVersionKind: testv1alpha1.GroupVersion.WithKind("Gadget"),
		New:              func() v1alpha1.Object { return &testv1alpha1.Gadget{} },
		Templates: fstest.MapFS{
			"_kind.yaml": {Data: []byte("owns: [{apiVersion: v1, kind: ConfigMap}]\n")},
			"cm.yaml":    {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n")},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	waiting := &kindTypes{required: map[schema.GroupVersionKind]bool{gizmo: true}, optional: map[schema.GroupVersionKind]bool{}}
	if err := stillWaits(waiting, next); err == nil || !strings.Contains(err.Error(), "missing.stencil.dev/v1/Gizmo") {
		t.Errorf("got %v, want a refusal naming the Gizmo type", err)
	}
	served := &kindTypes{required: map[schema.GroupVersionKind]bool{}, optional: map[schema.GroupVersionKind]bool{}}
	if err := stillWaits(served, next); err != nil {
		t.Errorf("refused though the kind waits for nothing: %v", err)
	}
}

// TestNowServedBetweenReconciles: an optional type flips to served only
// between reconciles: a reconcile (r.swap's read lock) renders and prunes
// with the same answer, else it could prune the live objects of a type its
// render did not know was served.
func TestNowServedBetweenReconciles(t *testing.T) {
	cert := schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}
	r := &Reconciler{types: &kindTypes{required: map[schema.GroupVersionKind]bool{}, optional: map[schema.GroupVersionKind]bool{cert: false}}}
	r.swap.RLock() // a reconcile under way
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.nowServed(cert)
	}()
	// Wait until the flip either happened (wrong) or waits for the
	// reconcile: a pending writer makes TryRLock fail.
	for waiting := false; !waiting; {
		select {
		case <-done:
			t.Fatal("the type flipped to served in the middle of a reconcile")
		default:
		}
		if waiting = !r.swap.TryRLock(); !waiting {
			r.swap.RUnlock()
		}
	}
	if r.types.served(cert) {
		t.Fatal("the type is served in the middle of a reconcile")
	}
	r.swap.RUnlock() // the reconcile ends
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the flip never happened")
	}
	if !r.types.served(cert) {
		t.Error("the type is not served after the reconcile")
	}
}
