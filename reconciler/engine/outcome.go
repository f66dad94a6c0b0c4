package engine

import (
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// Action is what Apply did with one desired object, one word each, as
// Flux's ssa.ChangeSet tells it.
type Action string

// Change is what Apply did with one desired object: its kind, namespace
// (empty: cluster-scoped) and name, and the action.
type Change struct {
	Kind, Namespace, Name string
	Action                Action
}

// String is "configured ConfigMap ns/web".
func (c Change) String() string {
	if c.Namespace == "" {
		return string(c.Action) + " " + c.Kind + " " + c.Name
	}
	return string(c.Action) + " " + c.Kind + " " + c.Namespace + "/" + c.Name
}

// ApplyOutcome is what apply did.
type ApplyOutcome struct {
	// Changes say what Apply did with each desired object it reached, in
	// order (an error stops it before the others).
	Changes []Change
	// Applied are the desired objects it applied.
	Applied []*unstructured.Unstructured
	// Live are the API server's answers for the applied objects of types
	// cached whole, by IDOf: fresher than the cache, for the status template.
	Live  map[ObjectID]client.Object
	Drift []v1alpha1.ObjectDrift
	// Conflicts are the desired objects it left alone: they exist and are
	// not this resource's.
	Conflicts []Conflict
	// OthersWrote: another write to an applied object was seen while our
	// apply was in flight; reconcile again.
	OthersWrote bool
	// Waiting: the cache has not caught up with an earlier apply yet.
	Waiting bool
	// Immutable are the refusals of applies that would change a field that
	// cannot change; the other objects were still applied.
	Immutable []error
	// Rejected are the applies the API server rejected as invalid, which
	// no retry of the same render fixes; the other objects were still
	// applied.
	Rejected []error
	// Recreating names the objects deleted to be created anew.
	Recreating []string
	// Deferred are the corrections that wait because of a fight, and
	// fightsStarted counts the fights this apply started.
	Deferred      []DeferredCorrection
	FightsStarted int
	// FightCorrections counts the corrections made during fights (their
	// drift is not reported anew).
	FightCorrections int
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

// change records what Apply did with d.
func (out *ApplyOutcome) change(d *unstructured.Unstructured, action Action) {
	out.Changes = append(out.Changes, Change{Kind: d.GetKind(), Namespace: d.GetNamespace(), Name: d.GetName(), Action: action})
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
	out.Applied = append(out.Applied, d)
	out.change(d, appliedAction(v))
	if whole {
		out.Live[IDOf(d)] = live
	}
}
