package engine

import (
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// TestOutcomeIsDerivedFromChanges: what the reconciler reads of an apply
// (applied objects, live answers, drift, conflicts, refusals, fights) is
// derived from the one record, the changes, each object's in its place.
func TestOutcomeIsDerivedFromChanges(t *testing.T) {
	obj := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("ConfigMap")
		u.SetNamespace("ns")
		u.SetName(name)
		return u
	}
	created, relabeled, skipped, refused, invalid, recreated, fought, waiting, broken :=
		obj("created"), obj("relabeled"), obj("skipped"), obj("refused"), obj("invalid"), obj("recreated"), obj("fought"), obj("waiting"), obj("broken")
	answer := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "created", Namespace: "ns"}}
	immutable := immutableError{object: refused, fields: []string{"spec.selector"}, err: errors.New("field is immutable")}
	recreate := immutableError{object: recreated, fields: []string{"spec.clusterIP"}, err: errors.New("field is immutable")}
	rejection := errors.New("invalid")
	stopped := errors.New("connection refused")
	drift := v1alpha1.ObjectDrift{Kind: "ConfigMap", Name: "fought"}
	fight := DeferredCorrection{Drift: drift}
	conflict := Conflict{object: `ConfigMap "skipped"`}

	var out ApplyOutcome
	out.applied(created, verdict{decision: create}, answer, true)
	out.change(relabeled, Configured) // a shard's label patched: configured, not applied
	c := out.of(skipped)
	c.Action, c.Conflict = Skipped, &conflict
	c = out.of(refused)
	c.Action, c.Err = Refused, immutable
	c = out.of(invalid)
	c.Action, c.Err = Refused, rejection
	c = out.of(recreated)
	c.Action, c.Err = Recreated, recreate
	out.of(fought).Drift = append(out.of(fought).Drift, drift)
	out.of(fought).Fight = &fight
	out.change(fought, Deferred)
	out.change(waiting, Waiting)
	out.of(broken).Drift = []v1alpha1.ObjectDrift{{Kind: "ConfigMap", Name: "broken"}}
	out.failed(broken, stopped)

	if got := out.Applied(); len(got) != 1 || got[0] != created {
		t.Errorf("Applied = %v, want the created object alone (a relabelled one is not applied)", got)
	}
	if got := out.Live(); len(got) != 1 || got[IDOf(created)] != client.Object(answer) {
		t.Errorf("Live = %v, want the created object's answer", got)
	}
	if got := out.Conflicts(); len(got) != 1 || got[0].object != conflict.object {
		t.Errorf("Conflicts = %v, want the skipped object's", got)
	}
	if got := out.Immutable(); len(got) != 1 || !errors.Is(got[0], immutable.err) {
		t.Errorf("Immutable = %v, want the refused object's", got)
	}
	if got := out.Rejected(); !slices.Equal(got, []error{rejection}) {
		t.Errorf("Rejected = %v, want the invalid object's", got)
	}
	if got, want := out.Recreating(), []string{`ConfigMap "recreated" in namespace "ns" (to change spec.clusterIP)`}; !slices.Equal(got, want) {
		t.Errorf("Recreating = %q, want %q", got, want)
	}
	if got := out.Deferred(); len(got) != 1 || got[0].Drift.Name != "fought" {
		t.Errorf("Deferred = %v, want the fought object's", got)
	}
	if got := out.Drift(); len(got) != 2 || got[0].Name != "fought" || got[1].Name != "broken" {
		t.Errorf("Drift = %v, want the fought object's, then the broken one's, in order", got)
	}
	if !out.Waiting() {
		t.Error("Waiting = false, want true: an object waits for the cache")
	}
	last := out.Changes[len(out.Changes)-1]
	if last.Name != "broken" || last.Action != Failed || !errors.Is(last.Err, stopped) {
		t.Errorf("the last change = %+v, want broken, failed with its error", last)
	}
	for _, c := range out.Changes {
		if c.Action == "" {
			t.Errorf("%s has no action", c.Name)
		}
	}
	if got, want := len(out.Changes), 9; got != want {
		t.Errorf("%d changes, want one per object (%d)", got, want)
	}
}
