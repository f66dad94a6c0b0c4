package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// This file decides what to do with each desired object (check): from
// the cache's copy of it, or from one read of the API server when the
// cache cannot tell, and from the records of what our manager owned after
// its last apply (the baselines), against which drift is measured. Below
// the decision: the records, whose an object is, what a template asks of
// its object, and what a refusal means to the decision.

// decision is what check decided to do with one desired object.
type decision int

func (d decision) String() string {
	return [...]string{"compare", "wait", "leave", "create", "apply", "adopt", "relabeled"}[d]
}

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
	// if it does, checkAfterCreate decides. That saves a read per new object,
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
	// handOver are the fields the object's template hands over (HandOver):
	// an apply leaves them out once another manager holds them.
	handOver *fieldpath.Set
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

// check decides about desired object d: in an apply's first turn from the
// cache (checkCached); in the turn after its create-first apply failed
// with createErr, from one read of the API server (checkAfterCreate).
func (a *Applier) check(ctx context.Context, d *unstructured.Unstructured, createErr error) (v verdict, err error) {
	if createErr != nil {
		v, err = a.checkAfterCreate(ctx, d, createErr)
	} else {
		v, err = a.checkCached(ctx, d)
	}
	v.handOver = HandOver(d)
	return v, err
}

// checkAfterCreate decides about d after its create-first apply failed
// with err. If it exists, or its type takes no version on a create, one
// read tells whose it is, and that verdict stands. A create that failed
// otherwise (which an existing object, someone else's, may also cause:
// admission sees it) is read too: a conflict stands, else err does.
func (a *Applier) checkAfterCreate(ctx context.Context, d *unstructured.Unstructured, err error) (verdict, error) {
	refused := errors.Is(err, ErrChangedWhileRead) // it exists (write says so of a create)
	if refused {
		a.refused.Store(IDOf(d), struct{}{})
	}
	if refusesVersionOnCreate(err) {
		a.noVersionOnCreate.Store(d.GroupVersionKind(), struct{}{})
		refused = true
	}
	v, readErr := a.checkUnseen(ctx, d)
	switch {
	case readErr != nil:
		return verdict{}, readErr
	case !refused && v.decision != leave:
		return verdict{}, err
	}
	return v, nil
}

// checkCached compares a desired object with the cached metadata of the
// live one.
func (a *Applier) checkCached(ctx context.Context, d *unstructured.Unstructured) (verdict, error) {
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
	live := a.liveFor(d)
	return live, a.client.Get(ctx, client.ObjectKeyFromObject(d), live)
}

// liveFor is an empty object for d's namespace and name, of the Go type
// the cache holds d's type in: a read or an apply decoded into it is in the
// cache's form, so that its managedFields records are byte for byte the
// cache's (an unstructured object re-encodes them, with its keys sorted).
func (a *Applier) liveFor(d *unstructured.Unstructured) client.Object {
	live := a.types.NewObject(d.GroupVersionKind())
	live.SetNamespace(d.GetNamespace())
	live.SetName(d.GetName())
	return live
}

// checkUnseen decides about a rendered object that the cache does not hold,
// that this process never applied, and whose create-first apply was refused
// (it exists, without stencil's labels or from another shard) or failed.
// One metadata-only read from the API server tells: absent (apply it), this
// resource's or adopted (apply it), or someone else's (conflict). It is a
// quorum read, not one from the API server's watch cache (resourceVersion
// "0"): the watch cache may lag, by seconds behind a busy API server, and a
// "not found" from it would let a force-apply take an object just created
// by someone else.
func (a *Applier) checkUnseen(ctx context.Context, d *unstructured.Unstructured) (verdict, error) {
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(d.GroupVersionKind())
	err := a.reader.Get(ctx, client.ObjectKeyFromObject(d), live)
	switch {
	case apierrors.IsNotFound(err):
		// Created only if it is still missing: someone may create it
		// after this read.
		if a.createFirst(d) {
			return verdict{decision: create}, nil
		}
		return verdict{decision: apply}, nil
	case err != nil:
		return verdict{}, fmt.Errorf("reading %s %s: %w", d.GetKind(), client.ObjectKeyFromObject(d), err)
	case ownedFor(live, d) && live.GetDeletionTimestamp() != nil:
		c := conflictWith(d, live)
		return verdict{decision: leave, conflict: &c}, nil
	case ownedFor(live, d) && CreateOnly(d):
		// It exists: a create-only object is not applied again. When it
		// came from another shard, it gets this shard's label, so that
		// this shard's cache holds it from now on.
		wrote, err := a.relabelShard(ctx, d, live)
		if wrote {
			return verdict{decision: relabeled}, err
		}
		return verdict{decision: compare}, err
	case ownedFor(live, d):
		// Ours, though not cached (it came from another shard, whose label
		// it carries): applied knowing its managers, as any cached object,
		// and only as it was read.
		return verdict{decision: apply, live: live, resourceVersion: live.GetResourceVersion()}, nil
	case adoptedBy(live, d):
		return verdict{decision: adopt, resourceVersion: live.GetResourceVersion()}, nil
	}
	c := conflictWith(d, live)
	return verdict{decision: leave, conflict: &c}, nil
}

// relabelShard sets, on an object of this resource that the cache does not
// hold, the shard label the render gives it (a resource moved between
// shards), with a UID precondition.
func (a *Applier) relabelShard(ctx context.Context, d *unstructured.Unstructured, live *metav1.PartialObjectMetadata) (wrote bool, err error) {
	want, ok := d.GetLabels()[v1alpha1.LabelShard]
	if live.GetLabels()[v1alpha1.LabelShard] == want {
		return false, nil
	}
	value := any(nil) // removed: the default shard's objects may carry none
	if ok {
		value = want
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": live.GetUID(), "labels": map[string]any{v1alpha1.LabelShard: value}}})
	if err != nil {
		return false, err
	}
	if err := writer(ctx, a.client).Patch(ctx, live, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldManager)); err != nil {
		return false, fmt.Errorf("labelling %s %s for this shard: %w", d.GetKind(), client.ObjectKeyFromObject(d), err)
	}
	return true, nil
}

// The records: what our manager owned on each object right after our
// last apply of it (its baseline), against which check measures drift.

// A restarted process (or a newly elected leader) knows no baselines, and
// learning one costs a server-side dry-run apply per object: 3,000 requests
// through every admission webhook for 1,000 converged resources, after
// every restart. So each resource's status records a digest of the
// baselines of its objects (status.ownedFields): the fields our manager
// owned on each right after our last apply, with the render it applied. A
// new process that finds the live objects' records with the same digest
// knows that nothing was taken from our manager since, and takes the live
// records as the baselines, without a request. When the digest differs (a
// field was taken, or stencil stopped between an apply and its status
// write), it learns the baselines as before, with dry runs.

// baseline is what our manager owned on an object right after an apply.
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

// baseline is what our manager owns right after applying d: remembered from
// our last apply, or learnt once with a server-side dry-run apply.
func (a *Applier) baseline(ctx context.Context, d *unstructured.Unstructured, hash string) (baseline, error) {
	if b, ok := a.baselines.Load(KeyOf(d)); ok && b.hash == hash {
		return b, nil
	}
	live := a.liveFor(d)
	body, err := d.MarshalJSON()
	if err != nil {
		return baseline{}, fmt.Errorf("encoding %s %s: %w", d.GetKind(), client.ObjectKeyFromObject(d), err)
	}
	if err := writer(ctx, a.client).Patch(ctx, live, client.RawPatch(types.ApplyPatchType, body), client.FieldOwner(FieldManager), client.ForceOwnership, client.DryRunAll); err != nil {
		return baseline{}, fmt.Errorf("dry-run applying %s %s: %w", d.GetKind(), client.ObjectKeyFromObject(d), err)
	}
	b := baseline{hash: hash, owned: OwnedRecord(live.GetManagedFields(), FieldManager)}
	a.baselines.Store(KeyOf(d), b)
	return b, nil
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

// restoreBaselines takes, for a process that knows none of desired's
// baselines, the live objects' records as their baselines when their digest
// is recorded, the digest status.ownedFields holds. It sends no request:
// the live objects come from the cache.
func (a *Applier) restoreBaselines(ctx context.Context, recorded string, desired []*unstructured.Unstructured) {
	if recorded == "" || a.knowsBaselines(desired) {
		return
	}
	h := sha256.New()
	found := make([]baseline, len(desired))
	for i, d := range desired {
		if CreateOnly(d) {
			continue
		}
		live, err := a.cached(ctx, d)
		if err != nil || !ownedFor(live, d) {
			return
		}
		found[i] = baseline{hash: live.GetAnnotations()[v1alpha1.AnnotationDesiredHash], owned: OwnedRecord(live.GetManagedFields(), FieldManager)}
		WriteOwned(h, d, found[i].hash, found[i].owned)
	}
	if "sha256:"+hex.EncodeToString(h.Sum(nil))[:32] != recorded {
		return
	}
	for i, d := range desired {
		if !CreateOnly(d) {
			a.baselines.LoadOrStore(KeyOf(d), found[i]) // never over one this process learnt
		}
	}
}

// knowsBaselines: this process has a baseline of every one of desired's
// objects (but create-only ones), for any render.
func (a *Applier) knowsBaselines(desired []*unstructured.Unstructured) bool {
	return !slices.ContainsFunc(desired, func(d *unstructured.Unstructured) bool {
		_, ok := a.baselines.Load(KeyOf(d))
		return !ok && !CreateOnly(d)
	})
}

// OwnedDigest is the digest of the baselines of desired's objects, or ""
// when one of them has none for its render (it was not applied: a
// conflict, or the cache still lagging) or holds fields left to other
// managers (a restored baseline would not know them).
func (a *Applier) OwnedDigest(desired []*unstructured.Unstructured) string {
	h := sha256.New()
	for _, d := range desired {
		if CreateOnly(d) {
			continue // judged against what this process created, if anything
		}
		b, ok := a.baselines.Load(KeyOf(d))
		if !ok || b.hash != d.GetAnnotations()[v1alpha1.AnnotationDesiredHash] {
			return ""
		}
		if leftOut := b.leftOut; leftOut != nil && !leftOut.Empty() {
			return "" // fields left to others (policy Report) are drift the records do not show
		}
		WriteOwned(h, d, b.hash, b.owned)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))[:32]
}

// WriteOwned writes d's part of the owned fields' digest (see
// OwnedDigest) to h: its type, namespace and name, desiredHash, and owned,
// our manager's managedFields record.
func WriteOwned(h hash.Hash, d *unstructured.Unstructured, desiredHash string, owned []string) {
	_, _ = fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%d\n", d.GroupVersionKind(), d.GetNamespace(), d.GetName(), desiredHash, len(owned))
	for _, r := range owned {
		_, _ = fmt.Fprintf(h, "%d\x00%s\n", len(r), r)
	}
}

// OwnedRecord is what managedFields records of the fields that manager owns
// through Apply on the object itself (not a subresource): the FieldsV1 JSON
// of its entries.
func OwnedRecord(entries []metav1.ManagedFieldsEntry, manager string) []string {
	var record []string
	for _, e := range entries {
		if e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "" && e.FieldsV1 != nil {
			record = append(record, e.FieldsV1.GetRawString())
		}
	}
	return record
}

// MissingFields are the fields that the base record owns, or that were left
// out of the apply for other managers (leftOut), and that the live record
// does not own. When nothing was left out and the two records are byte for
// byte the same (the API server encodes field sets in one order), nothing
// is missing and nothing is parsed.
func MissingFields(base, live []string, leftOut *fieldpath.Set) (*fieldpath.Set, error) {
	if slices.Equal(base, live) && (leftOut == nil || leftOut.Empty()) {
		return &fieldpath.Set{}, nil
	}
	was, err := parseRecord(base)
	if err != nil {
		return nil, err
	}
	if leftOut != nil {
		was = was.Union(leftOut)
	}
	is, err := parseRecord(live)
	if err != nil {
		return nil, err
	}
	return was.Difference(is), nil
}

func parseRecord(record []string) (*fieldpath.Set, error) {
	set := &fieldpath.Set{}
	for _, raw := range record {
		s := &fieldpath.Set{}
		if err := s.FromJSON(strings.NewReader(raw)); err != nil {
			return nil, fmt.Errorf("parsing managedFields: %w", err)
		}
		set = set.Union(s)
	}
	return set, nil
}

// Whose an object is: this resource's, adopted, or someone else's (a
// conflict, described for the status).

// ownedFor reports whether live is the object that stencil rendered as d
// (d carries its resource's owner label and annotation). A controller
// ownerReference decides when there is one: it must point to the resource.
// Without one (cluster-scoped objects, or one whose reference someone
// removed) it takes two proofs, the owner UID label and the owner
// annotation: a label alone is easily copied, by a pod template for one.
func ownedFor(live metav1.Object, d *unstructured.Unstructured) bool {
	uid := d.GetLabels()[v1alpha1.LabelOwnerUID]
	if ref := metav1.GetControllerOf(live); ref != nil {
		return string(ref.UID) == uid
	}
	return live.GetLabels()[v1alpha1.LabelOwnerUID] == uid &&
		live.GetAnnotations()[v1alpha1.AnnotationOwner] == d.GetAnnotations()[v1alpha1.AnnotationOwner]
}

// adoptedBy reports whether a person asked, on live, that the resource d was
// rendered for take it over. An object that another controller holds is
// never taken over: its controller would fight for it.
func adoptedBy(live metav1.Object, d *unstructured.Unstructured) bool {
	want := d.GetAnnotations()[v1alpha1.AnnotationOwner]
	return want != "" && live.GetAnnotations()[v1alpha1.AnnotationAdopt] == want && metav1.GetControllerOf(live) == nil
}

// predecessorOf reports whether live was rendered for a resource of the
// same kind, namespace and name as d's that has been deleted (its UID
// differs), and is controlled by it: the garbage collector deletes it.
func predecessorOf(live metav1.Object, d *unstructured.Unstructured) bool {
	uid := live.GetLabels()[v1alpha1.LabelOwnerUID]
	owner := d.GetAnnotations()[v1alpha1.AnnotationOwner]
	ref := metav1.GetControllerOf(live)
	gk, _, ok := v1alpha1.ParseOwnerAnnotation(owner)
	return ok && uid != "" && uid != d.GetLabels()[v1alpha1.LabelOwnerUID] && live.GetAnnotations()[v1alpha1.AnnotationOwner] == owner &&
		ref != nil && string(ref.UID) == uid && ref.Kind == gk.Kind
}

// conflictWith describes live, which is in the way of d.
func conflictWith(d *unstructured.Unstructured, live metav1.Object) Conflict {
	gvk := d.GroupVersionKind()
	c := Conflict{ID: NewID(gvk, d.GetNamespace(), d.GetName()), object: gvk.Kind + " " + quoted(d.GetNamespace(), d.GetName()),
		holder: holderOf(live), predecessor: predecessorOf(live, d), deleting: live.GetDeletionTimestamp() != nil, ours: ownedFor(live, d)}
	if c.predecessor || c.deleting {
		c.finalizers = live.GetFinalizers()
	}
	if metav1.GetControllerOf(live) != nil || c.deleting {
		return c
	}
	c.adopt = "kubectl annotate " + kubectlObject(d) + " " + v1alpha1.AnnotationAdopt + "=" + d.GetAnnotations()[v1alpha1.AnnotationOwner]
	return c
}

// kubectlObject names d as kubectl arguments: "deployment.apps web -n ns".
func kubectlObject(d *unstructured.Unstructured) string {
	gvk := d.GroupVersionKind()
	object := strings.ToLower(gvk.Kind)
	if gvk.Group != "" {
		object += "." + gvk.Group
	}
	object += " " + d.GetName()
	if ns := d.GetNamespace(); ns != "" {
		object += " -n " + ns
	}
	return object
}

func quoted(namespace, name string) string {
	if namespace == "" {
		return fmt.Sprintf("%q", name)
	}
	return fmt.Sprintf("%q in namespace %q", name, namespace)
}

// holderOf says whose live is: the stencil resource it was rendered for
// (when its controller, if any, is that resource), its controller, or the
// managers that wrote it.
func holderOf(live metav1.Object) string {
	uid := live.GetLabels()[v1alpha1.LabelOwnerUID]
	ref := metav1.GetControllerOf(live)
	if gk, nn, ok := v1alpha1.ParseOwnerAnnotation(live.GetAnnotations()[v1alpha1.AnnotationOwner]); ok && uid != "" && (ref == nil || string(ref.UID) == uid) {
		return fmt.Sprintf("it belongs to %s %s, UID %s", gk.Kind, nn, uid)
	}
	if ref != nil {
		return fmt.Sprintf("it is controlled by %s %s", ref.Kind, ref.Name)
	}
	var managers []string
	for _, e := range live.GetManagedFields() {
		if !slices.Contains(managers, e.Manager) {
			managers = append(managers, e.Manager)
		}
	}
	if len(managers) == 0 {
		return "it was created outside stencil"
	}
	return "it is managed by " + strings.Join(managers[:min(len(managers), 3)], ", ")
}

// What a template asks of its object: create-only (AnnotationSSA), the
// fields it hands over (AnnotationHandOver: it sets them until another
// field manager takes one; from then on stencil leaves it to that
// manager, it is never drift, and stencil's applies leave it out, so that
// server-side apply neither reverts nor removes it).

// CreateOnly says whether d's template asks that it be created when
// missing and never updated (v1alpha1.AnnotationSSA).
func CreateOnly(d *unstructured.Unstructured) bool {
	return d.GetAnnotations()[v1alpha1.AnnotationSSA] == v1alpha1.SSAIfNotPresent
}

// HandOver is the set of fields d's template hands over; nil when none.
func HandOver(d *unstructured.Unstructured) *fieldpath.Set {
	value := d.GetAnnotations()[v1alpha1.AnnotationHandOver]
	if value == "" {
		return nil
	}
	set := &fieldpath.Set{}
	for spec := range strings.SplitSeq(value, ",") {
		var path fieldpath.Path
		for name := range strings.SplitSeq(strings.TrimSpace(spec), ".") {
			if name != "" {
				path = append(path, fieldpath.PathElement{FieldName: &name})
			}
		}
		if len(path) > 0 {
			set.Insert(path)
		}
	}
	return set
}

// What the API server's refusal of an apply means to the decision.

// refusal is what err, the API server's refusal of an apply of d on
// verdict v, means: an object read before the apply (an adoption, or one
// the cache did not hold) that changed since, or a create-first apply of
// an object that exists, is a refusal the read explains
// (ErrAdoptionRaced, ErrChangedWhileRead); any other is err.
func (v verdict) refusal(err error, d *unstructured.Unstructured) error {
	switch {
	case v.decision == adopt && apierrors.IsConflict(err):
		return fmt.Errorf("%w: %w", ErrAdoptionRaced, err)
	case v.decision == create && exists(err, d), v.resourceVersion != "" && apierrors.IsConflict(err):
		return fmt.Errorf("%w: %w", ErrChangedWhileRead, err)
	}
	return err
}

// createFirst: d's type takes a create-first apply.
func (a *Applier) createFirst(d *unstructured.Unstructured) bool {
	_, no := a.noVersionOnCreate.Load(d.GroupVersionKind())
	return !no
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

// ErrChangedWhileRead says that an object that stencil read before
// applying it (it was not in the cache) changed, or was created, after the
// read, and the API server refused the apply; the next reconcile looks at
// it again.
var ErrChangedWhileRead = errors.New("the object changed while stencil read it")

// ErrAdoptionRaced says that an object being adopted changed after
// stencil read it (its adopt annotation withdrawn, say), and the API
// server refused the apply; the next reconcile looks at it again.
var ErrAdoptionRaced = errors.New("the object changed while stencil adopted it")
