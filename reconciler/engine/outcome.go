package engine

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// Action is what Apply did with one desired object, one word each, as
// Flux's ssa.ChangeSet tells it.
type Action string

// Change is what Apply did with one desired object, and all it found of
// it: the one record of an apply (what the reconciler, status and metrics
// read is derived from the changes: Applied, Drift, Conflicts...).
type Change struct {
	// Kind, Namespace (empty: cluster-scoped) and Name of the object.
	Kind, Namespace, Name string
	Action                Action
	// Object is the desired object.
	Object *unstructured.Unstructured
	// Live is the API server's answer to its apply, for a type cached
	// whole: fresher than the cache, for the status template.
	Live client.Object
	// Drift are the fields another manager took, as Apply found them.
	Drift []v1alpha1.ObjectDrift
	// Conflict says whose a Skipped object is.
	Conflict *Conflict
	// Err is why the API server refused the object (Refused: a field that
	// cannot change, or invalid), the refusal that made Apply delete it to
	// create it anew (Recreated), or why its apply failed (Failed).
	Err error
	// Fight is the correction that waits, or goes on, because another
	// writer keeps changing the fields back.
	Fight *DeferredCorrection
	// applied: Apply applied the object (created, configured or adopted
	// it), not only relabelled it.
	applied bool
}

// String is "configured ConfigMap ns/web".
func (c Change) String() string {
	if c.Namespace == "" {
		return string(c.Action) + " " + c.Kind + " " + c.Name
	}
	return string(c.Action) + " " + c.Kind + " " + c.Namespace + "/" + c.Name
}

// ApplyOutcome is what Apply did: one Change per desired object it
// reached, and what it saw of the apply as a whole.
type ApplyOutcome struct {
	// Changes say what Apply did with each desired object it reached, in
	// order (an error stops it before the others).
	Changes []Change
	// OthersWrote: another write to an applied object was seen while our
	// apply was in flight; reconcile again.
	OthersWrote bool
	// FightsStarted counts the fights this apply started, and
	// FightCorrections the corrections made during fights (their drift is
	// not reported anew).
	FightsStarted, FightCorrections int
}

// of is the change of d, the object Apply is at: the last one, made now
// if it is another object's.
func (out *ApplyOutcome) of(d *unstructured.Unstructured) *Change {
	if n := len(out.Changes); n > 0 && out.Changes[n-1].Object == d {
		return &out.Changes[n-1]
	}
	out.Changes = append(out.Changes, Change{Kind: d.GetKind(), Namespace: d.GetNamespace(), Name: d.GetName(), Object: d})
	return &out.Changes[len(out.Changes)-1]
}

// failed records that Apply stopped at d with err: what it found of d
// before (drift, a fight) stays told.
func (out *ApplyOutcome) failed(d *unstructured.Unstructured, err error) {
	c := out.of(d)
	c.Action, c.Err = Failed, err
}

// change records what Apply did with d.
func (out *ApplyOutcome) change(d *unstructured.Unstructured, action Action) {
	out.of(d).Action = action
}

// Applied are the desired objects Apply applied.
func (out ApplyOutcome) Applied() []*unstructured.Unstructured {
	var objs []*unstructured.Unstructured
	for _, c := range out.Changes {
		if c.applied {
			objs = append(objs, c.Object)
		}
	}
	return objs
}

// Live are the API server's answers for the applied objects of types
// cached whole, by IDOf.
func (out ApplyOutcome) Live() map[ObjectID]client.Object {
	live := map[ObjectID]client.Object{}
	for _, c := range out.Changes {
		if c.Live != nil {
			live[IDOf(c.Object)] = c.Live
		}
	}
	return live
}

// Drift is the drift Apply found, object by object.
func (out ApplyOutcome) Drift() []v1alpha1.ObjectDrift {
	var drift []v1alpha1.ObjectDrift
	for _, c := range out.Changes {
		drift = append(drift, c.Drift...)
	}
	return drift
}

// Conflicts are the desired objects Apply left alone: they exist and are
// not this resource's.
func (out ApplyOutcome) Conflicts() []Conflict {
	var cs []Conflict
	for _, c := range out.Changes {
		if c.Conflict != nil {
			cs = append(cs, *c.Conflict)
		}
	}
	return cs
}

// Waiting reports whether the cache has not caught up with an earlier
// apply yet.
func (out ApplyOutcome) Waiting() bool {
	return slices.ContainsFunc(out.Changes, func(c Change) bool { return c.Action == Waiting })
}

// Immutable are the refusals of applies that would change a field that
// cannot change; the other objects were still applied.
func (out ApplyOutcome) Immutable() []error {
	return out.refusals(true)
}

// Rejected are the applies the API server rejected as invalid, which no
// retry of the same render fixes; the other objects were still applied.
func (out ApplyOutcome) Rejected() []error {
	return out.refusals(false)
}

// refusals are the errors of the Refused changes: those of immutable
// fields, or the others.
func (out ApplyOutcome) refusals(immutable bool) []error {
	var errs []error
	for _, c := range out.Changes {
		if _, ok := errors.AsType[immutableError](c.Err); c.Action == Refused && ok == immutable {
			errs = append(errs, c.Err)
		}
	}
	return errs
}

// Recreating names the objects deleted to be created anew, with the fields
// that made it necessary.
func (out ApplyOutcome) Recreating() []string {
	var names []string
	for _, c := range out.Changes {
		if e, ok := errors.AsType[immutableError](c.Err); c.Action == Recreated && ok {
			names = append(names, c.Kind+" "+quoted(c.Namespace, c.Name)+" (to change "+strings.Join(e.fields, ", ")+")")
		}
	}
	return names
}

// Deferred are the corrections that wait, or go on, because of a fight.
func (out ApplyOutcome) Deferred() []DeferredCorrection {
	var fs []DeferredCorrection
	for _, c := range out.Changes {
		if c.Fight != nil {
			fs = append(fs, *c.Fight)
		}
	}
	return fs
}

// appliedAction is the Action of an apply on verdict v.
func appliedAction(v verdict) Action {
	switch {
	case v.decision == adopt:
		return Adopted
	case v.decision == create, v.live == nil && v.resourceVersion == "":
		return Created // no object was seen: create-first, or read missing
	}
	return Configured
}

// Tally counts the changes by action, in the order of the actions' first
// changes: "configured 1, unchanged 2".
func (out ApplyOutcome) Tally() string {
	var order []Action
	n := map[Action]int{}
	for _, c := range out.Changes {
		if n[c.Action] == 0 {
			order = append(order, c.Action)
		}
		n[c.Action]++
	}
	parts := make([]string, len(order))
	for i, a := range order {
		parts[i] = string(a) + " " + strconv.Itoa(n[a])
	}
	return strings.Join(parts, ", ")
}

// The actions of Apply.
const (
	// Created: the object did not exist; Apply created it.
	Created Action = "created"
	// Configured: Apply applied the existing object (a new render, or
	// drift corrected).
	Configured Action = "configured"
	// Unchanged: the object is as desired; no write.
	Unchanged Action = "unchanged"
	// Adopted: Apply took the object over on a person's request.
	Adopted Action = "adopted"
	// Skipped: the object is someone else's (a conflict); left untouched.
	Skipped Action = "skipped"
	// Deferred: a correction that waits out a fight; no write yet.
	Deferred Action = "deferred"
	// Waiting: the cache has not shown Apply's last write of this render
	// yet; no write.
	Waiting Action = "waiting"
	// Recreated: Apply deleted the object to create it anew (a field that
	// cannot change, and the template allows it).
	Recreated Action = "recreated"
	// Refused: the API server refused the object: invalid, or a field
	// that cannot change where the object may not be recreated.
	Refused Action = "refused"
	// Failed: the apply of the object failed otherwise (Err says how),
	// and Apply stopped there.
	Failed Action = "failed"
)

// Adopted names the objects Apply took over on a person's request.
func (out ApplyOutcome) Adopted() []string {
	var names []string
	for _, c := range out.Changes {
		if c.Action == Adopted {
			names = append(names, c.Kind+" "+quoted(c.Namespace, c.Name))
		}
	}
	return names
}

// applied records the apply of d on verdict v, and the API server's answer
// when its type is cached whole.
func (out *ApplyOutcome) applied(d *unstructured.Unstructured, v verdict, live client.Object, whole bool) {
	c := out.of(d)
	c.Action, c.applied = appliedAction(v), true
	if whole {
		c.Live = live
	}
}
