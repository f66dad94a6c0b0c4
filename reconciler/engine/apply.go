package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/reconciler/syncmap"
)

// FieldManager is the field manager of the objects stencil applies.
const FieldManager = "stencil"

// Applier server-side-applies rendered objects, and only those that need it.
//
// An object needs an apply when it is missing, when its desired-hash
// annotation differs from the new render, or when our field manager no longer
// owns every field it owned right after our last apply of that render (its
// baseline): another manager took a field. Baselines come from apply
// responses, so values the API server normalises and list keys it fills in
// are never mistaken for drift. A fresh process takes the live records as
// baselines when the resource's status vouches for them (see
// restoreBaselines), else learns each baseline once, with a server-side
// dry-run apply; after that a converged object costs no request.
type Applier struct {
	client    client.Client
	reader    client.Reader
	baselines syncmap.Map[ObjectKey, baseline]
	health    syncmap.Map[ObjectKey, appliedHealth]
	// Types says how the cache holds each owned type.
	types CachedTypes
	// Writes tells the watch events of our own applies from others'.
	writes OwnWrites[ObjectKey]
	// firstApplies, shared by every kind, let one resource at a time create an
	// object name.
	firstApplies *FirstApplies
	// Fights paces the corrections of objects another writer keeps
	// changing back.
	fights *Fights
	// refused remembers the object ids whose create-first apply was
	// refused (they exist and are not in the cache: someone else's, as a
	// rule): their next check reads first, rather than try again.
	refused syncmap.Map[ObjectID, struct{}]
	// noVersionOnCreate remembers the types whose API server refuses a
	// create that names a version (see exists): their objects are read
	// first and then applied as they are.
	noVersionOnCreate syncmap.Map[schema.GroupVersionKind, struct{}]
	// OwnerKind is the type of the custom resources whose objects this
	// applier applies, and owns the types they declare (prune looks there).
	ownerKind schema.GroupVersionKind
	owns      []OwnedType
	// beyond are the namespaces, besides each owner's, where its objects
	// may be (Options.Namespaces).
	beyond []string
	served func(schema.GroupVersionKind) bool // nil: every type
	// Recorder tells a resource, in events, what prune left in place.
	recorder events.EventRecorder
}

// OwnedType is a type of object the owners declare.
type OwnedType struct {
	GVK           schema.GroupVersionKind
	ClusterScoped bool
}

// Options configure an Applier.
type Options struct {
	// Client writes, and reads from the cache (stencil's objects, of the
	// types in Types); Reader reads from the API server.
	Client client.Client
	Reader client.Reader
	Types  CachedTypes
	// FirstApplies are shared by every Applier of a process, so that one owner
	// at a time creates an object name.
	FirstApplies *FirstApplies
	// OwnerKind is the type of the owners (custom resources), and Owns the
	// types they declare: prune looks there, and in each owner's inventory.
	OwnerKind schema.GroupVersionKind
	Owns      []OwnedType
	// Namespaces are the namespaces, besides each owner's own, where its
	// namespaced objects may be (_kind.yaml's namespaces): prune and the
	// finalizer look there too.
	Namespaces []string
	// Recorder tells an owner, in events, what prune left in place.
	Recorder events.EventRecorder
	// Served, when set, says whether the cluster serves a type: prune
	// leaves the types it does not (an optional type whose CRD is not
	// installed has no objects, and listing it would fail).
	Served func(schema.GroupVersionKind) bool
}

// New is an Applier of the owners of opts.OwnerKind.
func New(opts Options) (*Applier, error) {
	switch {
	case opts.Client == nil || opts.Reader == nil:
		return nil, errors.New("an applier needs a client and a reader")
	case opts.Recorder == nil:
		return nil, errors.New("an applier needs an event recorder")
	case opts.OwnerKind.Empty():
		return nil, errors.New("an applier needs its owners' kind")
	case opts.FirstApplies == nil:
		return nil, errors.New("an applier needs the process's first applies")
	case len(opts.Types.Whole) > 0 && opts.Types.Scheme == nil:
		return nil, errors.New("an applier needs the scheme of the types it caches")
	}
	return &Applier{client: opts.Client, reader: opts.Reader, types: opts.Types, firstApplies: opts.FirstApplies, fights: NewFights(),
		ownerKind: opts.OwnerKind, owns: opts.Owns, beyond: opts.Namespaces, recorder: opts.Recorder, served: opts.Served}, nil
}

// Types says how the cache holds each type.
func (a *Applier) Types() CachedTypes { return a.types }

// UnseenSince names the owners of the applies that no watch event has
// shown since cutoff (see OwnWrites.UnseenSince).
func (a *Applier) UnseenSince(cutoff time.Time) []string { return a.writes.UnseenSince(cutoff) }

type baseline struct {
	hash string
	// owned is our manager's managedFields record right after the apply:
	// compact, and compared byte for byte before anything is parsed. In a
	// binary built with apimachinery's fieldsv1string tag (make build), it
	// is the very string the cached object's record holds: one copy.
	owned []string
	// leftOut are desired fields left out of the apply because other managers
	// hold them (policy Report): drift, though our manager never owned them.
	leftOut *fieldpath.Set
	// resourceVersion our apply produced, and when; 0 after a dry run.
	resourceVersion uint64
	appliedAt       time.Time
}

// appliedHealth is what kstatus said of the object of version
// resourceVersion that our apply returned (types whose health the kind
// judges): what to judge by until the cache catches up.
type appliedHealth struct {
	resourceVersion uint64
	health          ObjectHealth
}

// cacheGrace is how long stencil trusts that the cache only lags behind an
// apply of its own. Past it, an object the cache still does not hold is
// looked up again: its events may have been missed (a watch that expired and
// re-listed after the object was already deleted).
const cacheGrace = 10 * time.Second

// Action is what Apply did with one desired object, one word each, as
// Flux's ssa.ChangeSet tells it.
type Action string

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
	// Adopted names the objects it took over on a person's request.
	Adopted []string
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

// decision is what check decided to do with one desired object.
type decision int

const (
	// compare: the object is as this render applied it; only fields our
	// manager lost since (drift, in verdict.missing) call for an apply.
	compare decision = iota
	// wait: our last apply of this render is not in the cache yet; nothing
	// is done until it is.
	wait
	// leave: the object exists and is not this resource's (verdict.conflict);
	// it is left untouched.
	leave
	// create: the cache does not hold the object and this process never
	// applied it. It is applied only if it does not exist (absentVersion);
	// if it does, checkUnseen decides. That saves a read per new object,
	// and two processes (shards) that render one name cannot both create
	// it: the second apply is refused.
	create
	// apply: apply the object (a new render, or one of this resource's
	// that the cache does not hold).
	apply
	// adopt: the object is not this resource's yet, and a person asked
	// that it be: apply it, and it becomes the resource's.
	adopt
	// relabeled: a create-only object of this resource that the cache did
	// not hold, which checkUnseen gave this shard's label (the one write
	// such an object gets again); nothing more to do.
	relabeled
)

func (d decision) String() string {
	return [...]string{"compare", "wait", "leave", "create", "apply", "adopt", "relabeled"}[d]
}

// verdict is what check decided about one desired object, with what the
// decision needs.
type verdict struct {
	decision decision
	// missing are the fields our manager should own but no longer does
	// (compare).
	missing *fieldpath.Set
	// conflict says whose the object is (leave).
	conflict *Conflict
	// live is the cached object, when the cache holds it.
	live client.Object
	// resourceVersion, when set, is the version of the object that was
	// read from the API server (adopt, or an object of this resource that
	// the cache does not hold), and the apply carries it: if the object
	// changed since (an adoption withdrawn, another controller set), the
	// API server refuses it.
	resourceVersion string
	// firstApply: this resource's first apply of the object is under way
	// (FirstApplies) until the apply returns.
	firstApply bool
}

// stale: the decision is to apply the object.
func (v verdict) stale() bool {
	return v.decision == create || v.decision == apply || v.decision == adopt
}

// cachedVersion is the resourceVersion of the object as the cache holds
// it: 0 when it does not, or when v was read from the API server instead.
func (v verdict) cachedVersion() uint64 {
	if v.live == nil || (v.resourceVersion != "" && v.decision != adopt) {
		return 0
	}
	return ResourceVersion(v.live)
}

// Apply brings every desired object that is this resource's to its desired
// state and reports what it applied, the drift it found, the objects it
// left alone because they are someone else's, those whose apply would
// change an immutable field, and those the API server rejected as invalid.
// It stops at any other error. After conflicts, immutable fields,
// rejections or an error the caller must not prune.
func (a *Applier) Apply(ctx context.Context, cr v1alpha1.Object, desired []*unstructured.Unstructured) (ApplyOutcome, error) {
	out := ApplyOutcome{Live: map[ObjectID]client.Object{}}
	report := cr.StencilDriftPolicy() == v1alpha1.DriftReport
	a.restoreBaselines(ctx, cr.StencilStatus().OwnedFields, desired)
	for _, d := range desired {
		err := a.applyObject(ctx, d, report || CreateOnly(d), &out)
		if err == nil {
			continue
		}
		if err := a.refusedApply(ctx, d, err, &out); err != nil {
			return out, err
		}
	}
	return out, nil
}

// refusedApply handles an apply of d that failed with err: an immutable
// field recreates d when its template allows it; an object the API server
// rejected as invalid is reported, and the others applied still. Any other
// error stops the apply.
func (a *Applier) refusedApply(ctx context.Context, d *unstructured.Unstructured, err error, out *ApplyOutcome) error {
	if fields := immutableFields(err); len(fields) > 0 {
		return a.recreate(ctx, d, fields, err, out)
	}
	if rejected(err) {
		out.Rejected = append(out.Rejected, err)
		out.change(d, Refused)
		return nil
	}
	return err
}

// rejected: the API server refused the object itself as invalid (422) or
// too large (413): the same render is refused again, whatever the retry.
// Not an address already allocated (a Service's node port or cluster IP,
// which another object may give up), nor a webhook's denial (its own
// rules, which may change): those are retried as any failure.
func rejected(err error) bool {
	if err == nil {
		return false
	}
	if apierrors.IsRequestEntityTooLargeError(err) {
		return true
	}
	msg := err.Error()
	return apierrors.IsInvalid(err) && !strings.Contains(msg, "already allocated") && !strings.Contains(msg, "admission webhook")
}

// applyObject checks d and applies it when it needs it, adding to out.
func (a *Applier) applyObject(ctx context.Context, d *unstructured.Unstructured, report bool, out *ApplyOutcome) error {
	v, err := a.check(ctx, d)
	if v.firstApply {
		defer a.firstApplies.end(IDOf(d))
	}
	if err != nil {
		return err
	}
	if v.decision == create {
		next, err := a.createFirstApply(ctx, d, v, report, out)
		if next == nil || err != nil {
			return err
		}
		v = *next
	}
	return a.applyChecked(ctx, d, v, report, out)
}

// createFirstApply applies d, which the cache does not hold, only if it
// does not exist. If it exists, or the apply failed for another reason
// (which an existing object, someone else's, may also cause: admission sees
// it), one read tells whose it is, and the verdict it returns is checked as
// any other: next, nil when there is nothing more to do (applied, or
// failed with the error).
func (a *Applier) createFirstApply(ctx context.Context, d *unstructured.Unstructured, v verdict, report bool, out *ApplyOutcome) (next *verdict, err error) {
	applyErr := a.applyStale(ctx, d, v, report, out)
	if applyErr == nil {
		return nil, nil
	}
	refused := exists(applyErr, d)
	if refused {
		a.refused.Store(IDOf(d), struct{}{})
	}
	if refusesVersionOnCreate(applyErr) {
		a.noVersionOnCreate.Store(d.GroupVersionKind(), struct{}{})
		refused = true
	}
	v, err = a.checkUnseen(ctx, d)
	switch {
	case err != nil:
		return nil, err
	case !refused && v.decision != leave:
		return nil, applyErr
	}
	return &v, nil
}

// applyChecked acts on d's verdict: it leaves a conflict alone, reports and
// corrects drift, and applies d when it is stale.
func (a *Applier) applyChecked(ctx context.Context, d *unstructured.Unstructured, v verdict, report bool, out *ApplyOutcome) error {
	if v.decision == leave {
		out.Conflicts = append(out.Conflicts, *v.conflict)
		out.change(d, Skipped)
		return nil //nolint:nilerr // a conflict is reported in status, and the other objects are still applied
	}
	out.Waiting = out.Waiting || v.decision == wait
	stale, deferred, err := a.onDrift(ctx, d, v, report, out)
	switch {
	case err != nil:
		return err
	case deferred:
		out.change(d, Deferred)
	case v.decision == wait:
		out.change(d, Waiting)
	case v.decision == relabeled:
		out.change(d, Configured)
	case !stale:
		out.change(d, Unchanged)
	default:
		return a.applyStale(ctx, d, v, report, out)
	}
	return nil
}

// exists: a create-first apply of d was refused because d exists: a
// conflict that names d (a quota's admission also answers with a conflict,
// naming the quota).
func exists(err error, d *unstructured.Unstructured) bool {
	var status apierrors.APIStatus
	if !apierrors.IsConflict(err) || !errors.As(err, &status) {
		return false
	}
	details := status.Status().Details
	return details != nil && details.Name == d.GetName() && details.Group == d.GroupVersionKind().Group
}

// refusesVersionOnCreate: the API server takes no version on a create (some
// older ones did so for Services, kubernetes#106745, and said so).
func refusesVersionOnCreate(err error) bool {
	return apierrors.IsInternalError(err) && strings.Contains(err.Error(), "resourceVersion should not be set")
}

// createFirst: d's type takes a create-first apply.
func (a *Applier) createFirst(d *unstructured.Unstructured) bool {
	_, no := a.noVersionOnCreate.Load(d.GroupVersionKind())
	return !no
}

// absentVersion is the resourceVersion of a create-first apply. The API
// server creates an object that does not exist whatever version the apply
// names, and refuses, with a conflict, to apply to an existing object whose
// version differs (the optimistic lock of the API conventions). No storage
// gives an object this version: it is the largest a version can be
// (etcd's revisions, and kine's, count up from 1).
const absentVersion = "18446744073709551615"

// applyStale applies d. Under policy Report it leaves out the fields that
// other managers hold (a new render must not revert what Report only
// reports), and reports them.
func (a *Applier) applyStale(ctx context.Context, d *unstructured.Unstructured, v verdict, report bool, out *ApplyOutcome) error {
	body, leftOut := d, (*fieldpath.Set)(nil)
	if v.live != nil {
		var err error
		if report {
			body, leftOut, err = withoutOthersFields(d, v.live.GetManagedFields(), FieldManager)
		}
		if err == nil {
			body, err = WithoutHandedOver(body, d, v.live.GetManagedFields())
		}
		if err != nil {
			return fmt.Errorf("reading the managers of %s %s: %w", d.GetKind(), client.ObjectKeyFromObject(d), err)
		}
		if h := HandOver(d); h != nil && leftOut != nil {
			leftOut = leftOut.RecursiveDifference(h)
		}
	}
	if v.decision == adopt && CreateOnly(d) {
		// A create-only object's content is a value made once: adopting
		// one takes it over as it is (stencil's labels, annotations and
		// owner), never replacing its content with this render's.
		body = adoptionBody(d)
	}
	switch {
	case v.decision == create:
		body = body.DeepCopy()
		body.SetResourceVersion(absentVersion)
	case v.resourceVersion != "":
		body = body.DeepCopy()
		body.SetResourceVersion(v.resourceVersion)
	}
	key := KeyOf(d)
	a.writes.Begin(key)
	live, err := a.applyOne(ctx, body, false, leftOut)
	if others := a.writes.endAwaited(key, live, v.cachedVersion(), d.GetAnnotations()[v1alpha1.AnnotationOwner]); others {
		out.OthersWrote = true
	}
	if err != nil && v.decision == adopt && apierrors.IsConflict(err) {
		return fmt.Errorf("%w: %w", ErrAdoptionRaced, err)
	}
	if err != nil && (v.decision == create && exists(err, d) || v.resourceVersion != "" && apierrors.IsConflict(err)) {
		return fmt.Errorf("%w: %w", ErrChangedWhileRead, err)
	}
	if err != nil {
		return err
	}
	if v.decision == create || v.resourceVersion != "" { // only a read-then-apply can follow a refusal
		a.refused.Delete(IDOf(d))
	}
	out.Applied = append(out.Applied, d)
	out.change(d, appliedAction(v))
	if v.decision == adopt {
		out.Adopted = append(out.Adopted, d.GetKind()+" "+quoted(d.GetNamespace(), d.GetName()))
	}
	if a.types.Whole[d.GroupVersionKind()] {
		out.Live[IDOf(d)] = live
	}
	if leftOut != nil && !leftOut.Empty() {
		drift, err := a.Report(ctx, d, leftOut)
		if err != nil {
			return err
		}
		if len(drift.Fields) > 0 {
			out.Drift = append(out.Drift, drift)
		}
	}
	return nil
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

// adoptionBody is the apply that adopts d's live object without touching
// its content: d's identity and metadata, which make the object the
// resource's.
func adoptionBody(d *unstructured.Unstructured) *unstructured.Unstructured {
	meta := map[string]any{"name": d.GetName()}
	if ns := d.GetNamespace(); ns != "" {
		meta["namespace"] = ns
	}
	for _, key := range []string{"labels", "annotations", "ownerReferences"} {
		if v, ok := d.Object["metadata"].(map[string]any)[key]; ok {
			meta[key] = runtime.DeepCopyJSONValue(v)
		}
	}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": d.GetAPIVersion(), "kind": d.GetKind(), "metadata": meta}}
}

// CreateOnly says whether d's template asks that it be created when
// missing and never updated (v1alpha1.AnnotationSSA).
func CreateOnly(d *unstructured.Unstructured) bool {
	return d.GetAnnotations()[v1alpha1.AnnotationSSA] == v1alpha1.SSAIfNotPresent
}

// createOnlyDrift is the verdict on a create-only object that an earlier
// render created: the fields our manager owned right after creating it and
// no longer owns, if this process created it; else nothing is known.
func (a *Applier) createOnlyDrift(d *unstructured.Unstructured, live client.Object) (verdict, error) {
	b, ok := a.baselines.Load(KeyOf(d))
	if !ok || b.hash != live.GetAnnotations()[v1alpha1.AnnotationDesiredHash] {
		return verdict{decision: compare, live: live}, nil
	}
	missing, err := MissingFields(b.owned, OwnedRecord(live.GetManagedFields(), FieldManager), nil)
	return verdict{decision: compare, missing: missing, live: live}, err
}

// ErrChangedWhileRead says that an object that stencil read before
// applying it (it was not in the cache) changed, or was created, after the
// read, and the API server refused the apply; the next reconcile looks at
// it again.
var ErrChangedWhileRead = errors.New("the object changed while stencil read it")

// ErrAdoptionRaced says that an object being adopted changed after
// stencil read it (its adopt annotation withdrawn, say), and the API
// server refused the apply; the next reconcile looks at it again.
var ErrAdoptionRaced = errors.New("the object changed while stencil adopted it")

// check compares a desired object with the cached metadata of the live one.
func (a *Applier) check(ctx context.Context, d *unstructured.Unstructured) (verdict, error) {
	live, err := a.cached(ctx, d)
	if apierrors.IsNotFound(err) {
		live = nil
	} else if err != nil {
		return verdict{}, fmt.Errorf("reading %s %s: %w", d.GetKind(), client.ObjectKeyFromObject(d), err)
	}
	hash := d.GetAnnotations()[v1alpha1.AnnotationDesiredHash]
	v := decide(d, live, func(cached uint64) bool { return a.appliedNewer(d, hash, cached) })
	switch {
	case v.decision == create:
		return a.checkCreate(ctx, d)
	case v.decision != compare:
		return v, nil
	case CreateOnly(d) && live.GetAnnotations()[v1alpha1.AnnotationDesiredHash] != hash:
		// Created from an earlier render, and never applied again. Its
		// drift is measured against what that render's apply owned, when
		// this process remembers it; a dry run of the new render could
		// itself be refused (an immutable Job template) and would count
		// the fields the new render adds as drift.
		return a.createOnlyDrift(d, live)
	}
	base, err := a.baseline(ctx, d, hash)
	if err != nil {
		return verdict{}, err
	}
	missing, err := MissingFields(base.owned, OwnedRecord(live.GetManagedFields(), FieldManager), base.leftOut)
	if h := HandOver(d); h != nil && missing != nil {
		missing = missing.RecursiveDifference(h) // taken as the template allows: not drift
	}
	return verdict{decision: compare, missing: missing, live: live}, err
}

// decide is what to do with desired object d, from the cache's copy of it
// (live; nil: the cache does not hold it) alone: a pure function of what
// the cache says. appliedNewer says whether this process applied this very
// render less than cacheGrace ago, to a version newer than the cached one
// (0: none cached), so the cache only lags behind. A compare verdict's
// missing fields, and a create's claim, are check's to find.
func decide(d *unstructured.Unstructured, live client.Object, appliedNewer func(cached uint64) bool) verdict {
	if live == nil {
		// Our apply may not be in the cache yet: a deletion would have
		// dropped the baseline (see ForgetDeleted).
		if appliedNewer(0) {
			return verdict{decision: wait}
		}
		return verdict{decision: create}
	}
	hash, owned := d.GetAnnotations()[v1alpha1.AnnotationDesiredHash], ownedFor(live, d)
	switch {
	case !owned && !adoptedBy(live, d):
		c := conflictWith(d, live)
		return verdict{decision: leave, conflict: &c}
	case live.GetDeletionTimestamp() != nil:
		// Ours, and on its way out (finalizers hold it): an apply would
		// only update what is about to go. Its deletion brings us back.
		c := conflictWith(d, live)
		return verdict{decision: leave, conflict: &c}
	case !owned:
		return verdict{decision: adopt, live: live, resourceVersion: live.GetResourceVersion()}
	case CreateOnly(d) && live.GetAnnotations()[v1alpha1.AnnotationDesiredHash] != hash:
		return verdict{decision: compare, live: live} // against what created it (createOnlyDrift)
	case live.GetAnnotations()[v1alpha1.AnnotationDesiredHash] != hash:
		if appliedNewer(ResourceVersion(live)) {
			return verdict{decision: wait}
		}
		return verdict{decision: apply, live: live}
	case appliedNewer(ResourceVersion(live)):
		// The cache has not caught up with our last apply: the reconcile
		// looks again at cacheBackstop (its update event is dropped as our
		// own, and may have cleared the unseen write already).
		return verdict{decision: wait}
	}
	return verdict{decision: compare, live: live}
}

// checkCreate decides about d, which the cache does not hold and this
// process did not just apply: it begins this resource's first apply of d
// (another resource creating it now is a conflict), and
// creates d only if it does not exist, unless an earlier create of it was
// refused or its type takes no create-first apply: then one read says.
func (a *Applier) checkCreate(ctx context.Context, d *unstructured.Unstructured) (verdict, error) {
	id := IDOf(d)
	if creator, ok := a.firstApplies.begin(id, d.GetAnnotations()[v1alpha1.AnnotationOwner]); !ok {
		c := conflictWith(d, &metav1.PartialObjectMetadata{})
		c.holder = "it is being created for " + creator
		return verdict{decision: leave, conflict: &c}, nil
	}
	if _, refused := a.refused.Load(id); refused || !a.createFirst(d) {
		v, err := a.checkUnseen(ctx, d)
		v.firstApply = true
		return v, err
	}
	return verdict{decision: create, firstApply: true}, nil
}

// cached reads the live object from the cache that holds its type: whole
// or metadata-only.
func (a *Applier) cached(ctx context.Context, d *unstructured.Unstructured) (client.Object, error) {
	live := a.types.NewObject(d.GroupVersionKind())
	return live, a.client.Get(ctx, client.ObjectKeyFromObject(d), live)
}

// baseline is what our manager owns right after applying d: remembered from
// our last apply, or learnt once with a dry run.
func (a *Applier) baseline(ctx context.Context, d *unstructured.Unstructured, hash string) (baseline, error) {
	if b, ok := a.baselines.Load(KeyOf(d)); ok && b.hash == hash {
		return b, nil
	}
	if _, err := a.applyOne(ctx, d, true, nil); err != nil {
		return baseline{}, err
	}
	b, _ := a.baselines.Load(KeyOf(d))
	return b, nil
}

// applyOne server-side-applies d with force, or dry-runs it, records the
// fields our manager owns afterwards (and leftOut, the fields left out for
// other managers) as d's baseline, and returns the API server's answer: the
// whole object for types cached whole, else only its metadata (the API
// server sends no more, and there is less to decode).
func (a *Applier) applyOne(ctx context.Context, d *unstructured.Unstructured, dryRun bool, leftOut *fieldpath.Set) (client.Object, error) {
	body, err := d.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("encoding %s %s: %w", d.GetKind(), client.ObjectKeyFromObject(d), err)
	}
	live := a.types.NewObject(d.GroupVersionKind())
	live.SetNamespace(d.GetNamespace())
	live.SetName(d.GetName())
	opts := []client.PatchOption{client.FieldOwner(FieldManager), client.ForceOwnership}
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	if err := writer(ctx, a.client).Patch(ctx, live, client.RawPatch(types.ApplyPatchType, body), opts...); err != nil {
		return nil, fmt.Errorf("applying %s %s: %w", d.GetKind(), client.ObjectKeyFromObject(d), err)
	}
	b := baseline{hash: d.GetAnnotations()[v1alpha1.AnnotationDesiredHash], owned: OwnedRecord(live.GetManagedFields(), FieldManager), leftOut: leftOut}
	if !dryRun {
		b.resourceVersion, b.appliedAt = ResourceVersion(live), time.Now()
	}
	a.baselines.Store(KeyOf(d), b)
	return live, nil
}

// OwnWrite reports whether o, as a watch delivered it, is our own apply's
// result: the very version our last apply produced, or, while an apply is in
// flight, any version (noted, and judged when the apply returns).
func (a *Applier) OwnWrite(gvk schema.GroupVersionKind, o metav1.Object) bool {
	key := keyOf(gvk, o)
	return a.writes.Note(key, ResourceVersion(o), func() bool {
		b, ok := a.baselines.Load(key)
		return ok && b.resourceVersion != 0 && b.resourceVersion == ResourceVersion(o)
	})
}

// appliedNewer reports whether we applied this very render, less than
// cacheGrace ago, and the cache only lags behind: our apply produced a
// resourceVersion newer than the cached one (0: not in the cache).
// resourceVersions are comparable integers on the API servers stencil
// supports; when one is not, apply again.
func (a *Applier) appliedNewer(d *unstructured.Unstructured, hash string, cached uint64) bool {
	b, ok := a.baselines.Load(KeyOf(d))
	if !ok {
		return false
	}
	return b.hash == hash && b.resourceVersion > 0 && cached < b.resourceVersion && time.Since(b.appliedAt) < cacheGrace
}

// ResourceVersion is o's resourceVersion as an integer, to compare with
// another; 0 when it is not one.
func ResourceVersion(o metav1.Object) uint64 {
	rv, err := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
	if err != nil {
		return 0
	}
	return rv
}

// PendingHealth is the health of our last apply of d while the cache holds
// an older version of it (cached: 0 when it holds none), less than
// cacheGrace after that apply; nil otherwise. The cache drops the event of
// our own write, so judging its older version would say what was, not what is.
func (a *Applier) PendingHealth(d *unstructured.Unstructured, cached uint64) *ObjectHealth {
	b, ok := a.baselines.Load(KeyOf(d))
	if !ok {
		return nil
	}
	if b.hash != d.GetAnnotations()[v1alpha1.AnnotationDesiredHash] || cached >= b.resourceVersion || time.Since(b.appliedAt) >= cacheGrace {
		return nil
	}
	h, ok := a.health.Load(KeyOf(d))
	if !ok || h.resourceVersion != b.resourceVersion {
		return nil
	}
	return &h.health
}

// RememberHealth records h, what kstatus said of the object of version rv
// that our apply of d returned, for PendingHealth. It is kept beside the
// baseline, not in it, so that it cannot bring back a baseline that a
// deletion dropped meanwhile; without the baseline of that version it is
// never read.
func (a *Applier) RememberHealth(d *unstructured.Unstructured, rv uint64, h ObjectHealth) {
	a.health.Store(KeyOf(d), appliedHealth{resourceVersion: rv, health: h})
}

// ForgetDeleted drops the baseline of an object that was deleted, so that the
// next reconcile applies it again instead of waiting for the cache.
func (a *Applier) ForgetDeleted(gvk schema.GroupVersionKind, o metav1.Object) {
	a.forgetKey(keyOf(gvk, o))
}

// forget drops the baseline of a pruned object.
func (a *Applier) forget(gvk schema.GroupVersionKind, namespace, name string, uid types.UID) {
	a.forgetKey(ObjectKey{id: NewID(gvk, namespace, name), owner: string(uid)})
}

// forgetKey drops all this process remembers of one object.
func (a *Applier) forgetKey(key ObjectKey) {
	a.writes.forget(key)
	a.baselines.Delete(key)
	a.health.Delete(key)
	a.fights.forget(key)
}

// writerKey carries, in a reconcile's context, the client that writes the
// resource's objects.
type writerKey struct{}

// WithWriter is ctx carrying c as the client that writes the resource's
// objects (see writer).
func WithWriter(ctx context.Context, c client.Client) context.Context {
	return context.WithValue(ctx, writerKey{}, c)
}

// writer is the client that writes the objects of the resource being
// reconciled: its ServiceAccount's, else fallback (stencil's).
func writer(ctx context.Context, fallback client.Client) client.Client {
	if c, ok := ctx.Value(writerKey{}).(client.Client); ok {
		return c
	}
	return fallback
}
