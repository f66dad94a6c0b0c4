package reconciler

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/internal/fence"
	"github.com/stencil-operator/stencil/reconciler/engine"
	"github.com/stencil-operator/stencil/reconciler/rollout"
	"github.com/stencil-operator/stencil/reconciler/shard"
	"github.com/stencil-operator/stencil/render"
)

// StatusFieldManager is the field manager of the custom resources' status,
// which is merge-patched (the engine's FieldManager applies their objects).
const StatusFieldManager = "stencil-status"

// finalizer is set on custom resources whose render holds cluster-scoped
// objects, which no ownerReference can clean up, and on those of graph
// kinds, whose objects are deleted in the graph's reverse order.
const finalizer = "stencil.dev/cleanup"

// Reconciler reconciles the custom resources of one kind. One generic type
// serves every kind.
type Reconciler struct {
	// current is the kind's templates (read through kind); swap lets a
	// reload replace them between reconciles (see reload.go).
	current  atomic.Pointer[render.Kind]
	swap     sync.RWMutex
	client   client.Client
	reader   client.Reader // uncached: what the cache cannot be trusted with
	recorder events.EventRecorder
	applier  *engine.Applier
	written  sync.Map // client.ObjectKey → writtenStatus
	// statusWrites tells the watch events of our status writes from others'.
	statusWrites engine.OwnWrites[client.ObjectKey]
	owners       sync.Map // owner UID → request, to map observed objects to their custom resource
	// waiters are the resources that found an object held by another
	// owner; its deletion brings them back.
	waiters engine.Waiters
	// rewrites paces the reconciles again that follow another writer's
	// change to an object while stencil wrote it: at once at first, then
	// backing off while it keeps happening (a fight).
	rewrites workqueue.TypedRateLimiter[types.NamespacedName]
	// conflicts holds, per resource in an ownership conflict, when the
	// conflict began: the retry backs off with its age.
	conflicts sync.Map // types.NamespacedName → time.Time
	// rollout paces template changes (nil: not at all).
	rollout *rollout.Gate
	// identities says which ServiceAccount writes the kind's objects;
	// tenants makes its clients (nil: stencil writes them itself).
	identities Identities
	tenants    *tenants
	// held are the objects of resources that wait for their turn in the
	// rollout, as the previous templates made them (see hold).
	held sync.Map // types.NamespacedName → heldObjects
	// mayWrite is Options.MayWrite (nil: always).
	mayWrite func() error
	// shards is Options.Shards (nil: unsharded, no claims).
	shards *shard.Shards
	scheme *runtime.Scheme
	// justClaimed holds the resources this shard claimed and has not
	// pruned since (see prune in run).
	justClaimed sync.Map // types.NamespacedName → bool: it had an inventory when claimed
	// leases tells whether a shard that holds a claim still runs (nil:
	// claims are never taken over).
	leases *shard.LeaseWatch
	// claims is the set of resources this shard holds (for the gauge).
	claims sync.Map // types.NamespacedName → bool
	// recheck wakes the resources whose applies the watch has not shown
	// (see recheckUnseen).
	recheck chan event.GenericEvent
	// orphans are the resources (by UID) deleted with propagationPolicy
	// Orphan (see orphaning).
	orphans sync.Map // types.UID → bool
	// inputs are the inputs each resource of a graph kind read last.
	inputs inputReads
	// inputCache holds the inputs' metadata (nil: no kind has inputs);
	// inputMemo the inputs as last read, by who read them.
	inputCache client.Reader
	inputMemo  *inputMemo
	// types are the types the kind needs that the cluster did not serve
	// when the controller was set up (see served.go); cache is the
	// manager's, which watches them once they are.
	types *kindTypes
	cache cache.Cache
	// started is the kind as its controller was set up: its watches and
	// types are of these templates' declaration (see unwatched).
	started *render.Kind
}

// Timings of the reconcile.
const (
	// A resource in an ownership conflict looks again after as long as the
	// conflict has lasted, at least conflictRetry and at most
	// maxConflictRetry, with jitter: an object that is not stencil's sends
	// no event when it goes or is annotated for adoption, and many
	// resources in conflict must not look all at once.
	conflictRetry    = 5 * time.Second
	maxConflictRetry = time.Minute
	// cacheBackstop: a resource is reconciled again when the watch has not
	// shown one of its applies this long after it, so that an object whose
	// events the cache missed (deleted before the informer saw it) is still
	// found missing (see recheckUnseen); and this long after a reconcile
	// that found the cache behind an apply (what it judged from the cache
	// was stale, and the apply's own event, dropped, will not wake it).
	cacheBackstop = 30 * time.Second
	// statusWriteTimeout bounds the status write, which runs even when the
	// reconcile's own deadline has passed.
	statusWriteTimeout = 15 * time.Second
	// After another writer changed an object while stencil wrote it, the
	// resource is reconciled again after rewriteBase, doubling while it
	// keeps happening, up to rewriteMax.
	rewriteBase = 5 * time.Millisecond
	rewriteMax  = time.Minute
	// recreateBackstop: after deleting objects to create them anew, look
	// again this soon even if the deletions' events were missed.
	recreateBackstop = 5 * time.Second
	// claimRetry: a resource another shard still holds is looked at again
	// this soon (that shard's release also wakes it).
	claimRetry = time.Second
	// readFailureRetry: a graph kind's render that failed after it read
	// inputs or live objects is tried again this late, should the watch
	// of what it read miss the change that fixes it.
	readFailureRetry = 5 * time.Minute
)

// Reconcile renders, applies, prunes and writes status, in that order. The
// status it writes says what happened, on every path: a failure in any phase,
// and a panic, each have their own reason.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (ret reconcile.Result, err error) {
	r.swap.RLock() // one reconcile, one version of the templates
	defer r.swap.RUnlock()
	cr := r.kind().New()
	if err := r.client.Get(ctx, req.NamespacedName, cr); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, err
		}
		r.forget(req.NamespacedName)
		// Gone, or moved to another shard: then it waits for this claim.
		if err := r.release(ctx, req.NamespacedName); err != nil {
			if errors.Is(err, fence.ErrFenced) {
				return fence.Requeue(ctx, err)
			}
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, nil
	}
	if ok, err := r.claimed(ctx, cr); err != nil || !ok {
		if err == nil {
			r.held.Delete(req.NamespacedName) // another shard's now
		}
		if errors.Is(err, fence.ErrFenced) {
			return fence.Requeue(ctx, err)
		}
		return reconcile.Result{RequeueAfter: claimRetry}, err
	}
	// Its objects' events find it by this UID (see ownerOf).
	r.owners.Store(cr.GetUID(), req.NamespacedName)
	if !cr.GetDeletionTimestamp().IsZero() {
		r.rollout.Forget(req.NamespacedName)
		if err := r.writable(); err != nil {
			return fence.Requeue(ctx, err)
		}
		err := r.finalizeAndReport(ctx, cr)
		if errors.Is(err, fence.ErrFenced) {
			return fence.Requeue(ctx, err)
		}
		if isStageLeft(err) {
			// The deletions' events bring it back; this is the backstop
			// (an object of a type no longer declared has no informer).
			return reconcile.Result{RequeueAfter: cacheBackstop}, nil
		}
		return reconcile.Result{}, err
	}
	current, err := r.currentStatus(cr)
	if err != nil {
		return reconcile.Result{}, err
	}
	res := &result{generation: cr.GetGeneration()}
	defer func() {
		if p := recover(); p != nil {
			ctrl.LoggerFrom(ctx).Error(fmt.Errorf("%v", p), "Reconcile panicked", "stack", string(debug.Stack()))
			ret, err = reconcile.Result{}, res.fail(v1alpha1.ReasonPanicked, false, fmt.Errorf("the reconcile panicked: %v", p))
		}
		ret, err = r.finish(ctx, cr, current, res, ret, err)
	}()
	return r.run(ctx, cr, res)
}

// run is the reconcile's phases: render, finalizer, apply, prune, status
// template. Each failure is recorded in res with its reason.
func (r *Reconciler) run(ctx context.Context, cr v1alpha1.Object, res *result) (reconcile.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	var err error
	r.rollout.Leave(client.ObjectKeyFromObject(cr)) // the gate adds it again if it still waits
	if err := r.types.notServed(); err != nil {
		// Someone must install a CRD; awaitTypes brings it back then.
		res.record(v1alpha1.ReasonTypeNotServed, true, err)
		return reconcile.Result{}, nil
	}
	plan, err := r.renderPlan(ctx, cr)
	if err != nil {
		log.Info("Render failed", "error", err.Error())
		if apierrors.IsForbidden(err) {
			// An input stencil (or the resource's ServiceAccount) may not
			// read: no event tells of a new RoleBinding.
			res.record(v1alpha1.ReasonForbidden, true, err)
			return reconcile.Result{RequeueAfter: forbiddenRetry}, nil
		}
		if _, ok := errors.AsType[*render.ReadError](err); ok {
			// Reading an input failed (a timeout, a throttled API server):
			// retried with backoff, unlike a template's error.
			return reconcile.Result{}, res.fail(v1alpha1.ReasonInputReadFailed, false, err)
		}
		if overTime(err) {
			// The clock, not the spec, may be to blame (a loaded node):
			// retried with backoff.
			return reconcile.Result{}, res.fail(v1alpha1.ReasonLimitExceeded, true, err)
		}
		if _, ok := errors.AsType[*readFailure](err); ok {
			// The template may have failed on what it read: a change of
			// an input or of a node's object renders it again (the watch
			// holds what it read); this is the backstop.
			res.record(renderFailure(err), true, err)
			return reconcile.Result{RequeueAfter: wait.Jitter(readFailureRetry, 0.2)}, nil
		}
		// A retry cannot fix a template error; a spec change triggers a new reconcile.
		return reconcile.Result{}, reconcile.TerminalError(res.fail(renderFailure(err), true, err))
	}
	res.desired, res.graphWaiting = plan.Objects, plan.Waiting
	if len(res.graphWaiting) == 0 && engine.EmptyRender(cr, res.desired) {
		res.record(v1alpha1.ReasonEmptyRender, true, errEmptyRender)
		return reconcile.Result{}, nil
	}
	// Every write of its objects from here on (hold's too) is the
	// resource's ServiceAccount's, when one writes them.
	ctx, mayAct, err := r.actAs(ctx, cr, res.desired, res)
	if err != nil {
		reason := v1alpha1.ReasonApplyFailed
		if apierrors.IsForbidden(err) {
			reason = v1alpha1.ReasonForbidden // stencil may not act as it
		}
		return reconcile.Result{}, res.fail(reason, false, fmt.Errorf("checking what the resource's ServiceAccount may do: %w", err))
	}
	if !mayAct {
		// Nothing an event would tell of changes RBAC: look again.
		return reconcile.Result{RequeueAfter: forbiddenRetry}, nil
	}
	digest := renderDigest(res.desired)
	if waiting, err := r.awaitTurn(ctx, cr, res, digest); err != nil || waiting {
		if err == nil {
			err = r.hold(ctx, cr, res)
			if errors.Is(err, engine.ErrChangedWhileRead) {
				res.quiet = true
				return reconcile.Result{RequeueAfter: time.Second}, nil
			}
		}
		if err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{RequeueAfter: wait.Jitter(rollout.Backstop, 0.2)}, nil
	}
	r.held.Delete(client.ObjectKeyFromObject(cr)) // its turn came, or never had to
	if err := r.writable(); err != nil {
		return reconcile.Result{}, err // finish: fenced, nothing said
	}
	if err := r.ensureFinalizer(ctx, cr, res.desired); err != nil {
		if apierrors.IsConflict(err) {
			// The resource changed since the cache saw it: nothing happened
			// that status should tell; the retry reads the new version.
			res.quiet = true
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, res.failQuietly(ctx, v1alpha1.ReasonFinalizerFailed, err)
	}
	out, err := r.applier.Apply(ctx, cr, res.desired)
	if errors.Is(err, fence.ErrFenced) {
		return reconcile.Result{}, err // nothing counted: finish ends it quietly
	}
	res.applied, res.live, res.drift, res.othersWrote, res.fights = out.Applied, out.Live, out.Drift, out.OthersWrote, out.Deferred
	for _, d := range out.Deferred {
		res.drift = append(res.drift, d.Drift)
	}
	countFights(r.kind().GroupVersionKind().Kind, out.FightsStarted, out.FightCorrections)
	for _, o := range out.Adopted {
		log.Info("Adopted an existing object on request", "object", o)
		r.recorder.Eventf(cr, nil, corev1.EventTypeNormal, "Adopted", "Adopt", "Took over %s, which was annotated %s", o, v1alpha1.AnnotationAdopt)
	}
	if errors.Is(err, engine.ErrAdoptionRaced) || errors.Is(err, engine.ErrChangedWhileRead) {
		log.Info("An object changed between stencil's read and its apply; looking again", "error", err.Error())
		res.quiet = true
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	if err != nil {
		// Rejections before the failure are told with it.
		return reconcile.Result{}, res.failQuietly(ctx, v1alpha1.ReasonApplyFailed, errors.Join(r.withholdSecretData(res.desired, append([]error{err}, out.Rejected...))...))
	}
	if retry, blocked := r.leaveBlocked(ctx, cr, res, out); blocked {
		return reconcile.Result{RequeueAfter: retry}, nil
	}
	res.templates, res.renderDigest = r.kind().Templates(), digest
	res.ownedFields = r.applier.OwnedDigest(res.desired)
	// While nodes of a graph wait, nothing is pruned: their objects stay as
	// they are, whatever they carry (an object from before the kind had a
	// graph has no node annotation).
	if len(res.graphWaiting) == 0 {
		if res.pruned, err = r.pruneAfterClaim(ctx, cr, res.desired); err != nil {
			return reconcile.Result{}, res.fail(v1alpha1.ReasonPruneFailed, false, err)
		}
	}
	if res.kindStatus, err = r.kindStatus(ctx, cr, res); err != nil {
		// The objects are applied; what the status template reads changes
		// with them, so this is retried like any status failure.
		return reconcile.Result{}, res.fail(v1alpha1.ReasonStatusFailed, false, err)
	}
	if res.unhealthy, err = r.health(ctx, res); err != nil {
		// Not a failure of the reconcile: the objects are applied. Ready
		// says the object could not be read; the retry reads it again.
		return reconcile.Result{}, err
	}
	if len(res.applied)+len(res.pruned) > 0 {
		log.V(1).Info("Reconciled", "applied", len(res.applied), "pruned", len(res.pruned), "cr", klog.KObj(cr))
	}
	return reconcile.Result{RequeueAfter: nextLook(res, out.Waiting)}, nil
}

// awaitTurn asks the rollout gate whether this reconcile may apply a change
// that the templates alone bring. When it may not, res records why and the
// reconcile leaves the objects as they are.
func (r *Reconciler) awaitTurn(ctx context.Context, cr v1alpha1.Object, res *result, digest string) (bool, error) {
	change := r.rollout.TemplateChange(cr, digest)
	if change {
		intact, err := r.intact(ctx, cr)
		if err != nil {
			res.quiet = true // nothing happened; the retry looks again
			return false, err
		}
		change = intact
	}
	v, err := r.rollout.Admit(ctx, client.ObjectKeyFromObject(cr), cr.GetGeneration(), change)
	if err != nil {
		res.quiet = true
		return false, err
	}
	if !v.Since.IsZero() {
		res.rollout = &v1alpha1.RolloutStatus{Templates: r.kind().Templates(), Started: metav1.NewTime(v.Since)}
	}
	switch {
	case v.Started:
		ctrl.LoggerFrom(ctx).Info("Rolling out a change of the templates", "templates", r.kind().Templates(), "from", cr.StencilStatus().Templates)
		r.recorder.Eventf(cr, nil, corev1.EventTypeNormal, "RollingOut", "Apply",
			"Applying version %s of the templates, which changes this resource's objects; stencil rolls such changes out to at most %d %s resources at a time",
			r.kind().Templates(), r.rollout.Opts.Batch, r.kind().GroupVersionKind().Kind)
	case v.Halted:
		res.waiting = &pending{reason: v1alpha1.ReasonRolloutHalted, message: r.rollout.WaitMessage(v), templates: r.kind().Templates()}
	case v.Wait:
		res.waiting = &pending{reason: v1alpha1.ReasonRolloutWaiting, message: r.rollout.WaitMessage(v), templates: r.kind().Templates()}
	}
	return v.Wait, nil
}

// intact reports whether the objects a resource was last applied with (its
// inventory, of the kind's declared types) are all in the cache and, of the
// types the kind judges, healthy: only such a resource's change waits for
// its turn. One that lost an object, or whose objects are not healthy, has
// nothing a paced rollout would protect, and is applied at once.
func (r *Reconciler) intact(ctx context.Context, cr v1alpha1.Object) (bool, error) {
	probe := &result{}
	for _, e := range cr.StencilStatus().Inventory {
		o := &unstructured.Unstructured{}
		o.SetAPIVersion(e.APIVersion)
		o.SetKind(e.Kind)
		o.SetNamespace(e.Namespace)
		o.SetName(e.Name)
		gvk := o.GroupVersionKind()
		if !r.applier.Types().Declared(gvk) {
			continue // no informer for it; prune reads such types itself
		}
		if r.kind().JudgesHealth(gvk) {
			h, err := r.judgeLive(ctx, o, probe)
			if err != nil || !h.Current {
				return false, err
			}
			continue
		}
		err := r.client.Get(ctx, client.ObjectKeyFromObject(o), r.applier.Types().NewObject(gvk))
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("reading %s %s: %w", e.Kind, e.Name, err)
		}
	}
	return true, nil
}

// settleRollout tells the rollout gate how the reconcile of a resource
// ended, once its status says so, and reports a halt it causes.
func (r *Reconciler) settleRollout(ctx context.Context, cr v1alpha1.Object, res *result) {
	f := res.healthFailure()
	failed := ""
	if f != nil && f.stalled {
		failed = rollout.DescribeFailure(f.reason, f.err.Error())
	}
	why, halted := r.rollout.Settle(client.ObjectKeyFromObject(cr), res.generation, f == nil, failed)
	if !halted {
		return
	}
	ctrl.LoggerFrom(ctx).Info("The rollout of a change of the templates halted", "templates", r.kind().Templates(), "why", why)
	r.recorder.Eventf(cr, nil, corev1.EventTypeWarning, v1alpha1.ReasonRolloutHalted, "Rollout",
		"Version %s of the templates reached this resource and %s; stencil halted its rollout to the other %s resources until this one is Ready or deleted. Fix it, or roll stencil back to the previous templates",
		r.kind().Templates(), why, r.kind().GroupVersionKind().Kind)
}

func newRewrites() workqueue.TypedRateLimiter[types.NamespacedName] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](rewriteBase, rewriteMax)
}

// nextLook is when a reconcile that succeeded looks again: when a
// correction that waits because of a fight may go ahead, and at
// cacheBackstop when it found the cache behind an earlier apply; else never
// (0). An apply needs no look again: recheckUnseen wakes the resource if
// the watch does not show the apply.
func nextLook(res *result, waiting bool) time.Duration {
	var next time.Duration
	if waiting {
		next = cacheBackstop
	}
	for _, d := range res.fights {
		next = soonest(next, max(time.Until(d.Until), time.Millisecond))
	}
	return next
}

// leaveBlocked records the objects the apply could not bring to their
// desired state, and when to look again (the soonest of what each needs);
// after any of them nothing is pruned. Objects with immutable fields wait
// for someone to act (a retry cannot help; a change of spec or template, or
// the object's deletion, brings the resource back). Objects deleted to be
// created anew come back with their deletions' events, or the backstop.
// Objects in the way wait for their holder: at once when a cached holder is
// deleted (waiters), else after a backoff; a conflict with an object on its
// way out (a deleted predecessor's) resolves itself, so it is not Stalled.
func (r *Reconciler) leaveBlocked(ctx context.Context, cr v1alpha1.Object, res *result, out engine.ApplyOutcome) (time.Duration, bool) {
	log := ctrl.LoggerFrom(ctx)
	nn := client.ObjectKeyFromObject(cr)
	var retry time.Duration
	if len(out.Immutable) > 0 {
		log.Info("The API server refused to change immutable fields; nothing pruned", "objects", len(out.Immutable))
		res.also(v1alpha1.ReasonImmutableField, true, errors.Join(out.Immutable...))
	}
	if len(out.Recreating) > 0 {
		for _, o := range out.Recreating {
			log.Info("Deleted an object to create it anew", "object", o)
			r.recorder.Eventf(cr, nil, corev1.EventTypeNormal, "Recreated", "Recreate", "Deleted %s; stencil creates it anew", o)
		}
		res.also(v1alpha1.ReasonRecreating, false, fmt.Errorf("deleted %s; stencil creates them anew", strings.Join(out.Recreating, ", ")))
		retry = recreateBackstop
	}
	if len(out.Conflicts) > 0 {
		for _, c := range out.Conflicts {
			r.waiters.Add(c.ID, nn)
		}
		log.Info("Left objects that are not this resource's untouched; nothing pruned", "conflicts", len(out.Conflicts))
		res.also(v1alpha1.ReasonOwnershipConflict, !engine.GoingAway(out.Conflicts), engine.ConflictsError(out.Conflicts))
		began, _ := r.conflicts.LoadOrStore(nn, time.Now())
		retry = soonest(retry, backoff(time.Since(began.(time.Time))))
	} else {
		r.conflicts.Delete(nn)
	}
	if len(out.Rejected) > 0 {
		log.Info("The API server rejected objects as invalid; applied the others, nothing pruned", "rejected", len(out.Rejected))
		res.also(v1alpha1.ReasonRejected, true, errors.Join(r.withholdSecretData(res.desired, out.Rejected)...))
		retry = soonest(retry, rejectedRetry)
	}
	blocked := len(out.Immutable)+len(out.Recreating)+len(out.Conflicts)+len(out.Rejected) > 0
	return soonest(retry, nextLook(res, out.Waiting)), blocked
}

// rejectedRetry: a resource with an object the API server rejected looks
// again this late (a change of its spec or of the templates comes sooner;
// an admission policy that rejected it may have changed).
const rejectedRetry = 10 * time.Minute

// soonest is the shorter of two waits, where 0 is none.
func soonest(a, b time.Duration) time.Duration {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}

// backoff is how long a resource that has been in conflict for lasted
// waits before it looks again: as long again, within [conflictRetry,
// maxConflictRetry], plus up to a fifth more at random. Events (the
// resource changed, a cached holder deleted) bring it back sooner; they do
// not make it wait longer.
func backoff(lasted time.Duration) time.Duration {
	return wait.Jitter(min(max(lasted, conflictRetry), maxConflictRetry), 0.2)
}

// finish writes the status of what res saw, unless the namespace is going
// away, with a deadline of its own (the reconcile's may have passed), and
// reconciles again at once when another writer changed an object while we
// wrote it: even after a failure a retry cannot fix, as that write may be
// the fix.
func (r *Reconciler) finish(ctx context.Context, cr v1alpha1.Object, current map[string]any, res *result, ret reconcile.Result, err error) (reconcile.Result, error) {
	if errors.Is(err, fence.ErrFenced) {
		return fence.Requeue(ctx, err)
	}
	countObjects(r.kind().GroupVersionKind().Kind, res)
	if res.quiet {
		return ret, err
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		// Shutting down or no longer the leader: say nothing rather than
		// record the cancellation as a failure.
		return ret, err
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statusWriteTimeout)
	defer cancel()
	werr := r.writeStatus(wctx, cr, current, res)
	if errors.Is(werr, fence.ErrFenced) {
		return fence.Requeue(ctx, werr)
	}
	err = errors.Join(err, werr)
	if res.paced > 0 && err == nil {
		ret.RequeueAfter = soonest(ret.RequeueAfter, res.paced)
	}
	if res.paced == 0 && werr == nil {
		r.settleRollout(ctx, cr, res) // its status says how it went
	}
	nn := client.ObjectKeyFromObject(cr)
	if !res.othersWrote {
		r.rewrites.Forget(nn)
		return ret, err
	}
	if errors.Is(err, reconcile.TerminalError(nil)) {
		err = nil
	}
	if wait := r.rewrites.When(nn); err == nil {
		ret.RequeueAfter = soonest(ret.RequeueAfter, wait)
	}
	return ret, err
}

// writable asks Options.MayWrite whether this process may write now.
func (r *Reconciler) writable() error {
	if r.mayWrite == nil {
		return nil
	}
	return r.mayWrite()
}

// forget drops what this process remembers of a deleted custom resource.
func (r *Reconciler) forget(nn types.NamespacedName) {
	unhealthy.forget(r.kind().GroupVersionKind().Kind, nn)
	r.written.Delete(nn)
	r.rewrites.Forget(nn)
	r.waiters.Forget(nn)
	r.conflicts.Delete(nn)
	r.rollout.Forget(nn)
	r.held.Delete(nn)
	r.inputs.forget(nn)
	r.owners.Range(func(uid, owner any) bool {
		if owner == nn {
			r.owners.Delete(uid)
			r.orphans.Delete(uid)
		}
		return true
	})
}

// result is what one reconcile saw and did; status is computed from it.
type result struct {
	generation int64
	desired    []*unstructured.Unstructured
	applied    []*unstructured.Unstructured
	live       map[string]client.Object
	// othersWrote: another writer changed an object (or the custom
	// resource) while we wrote it.
	othersWrote bool
	pruned      []v1alpha1.InventoryEntry
	drift       []v1alpha1.ObjectDrift
	// failure is the first phase that failed; nil when all succeeded.
	failure *failure
	// quiet: nothing happened that status should tell (the namespace is
	// being deleted, or the resource changed under a finalizer patch);
	// no status is written.
	quiet bool
	// kindStatus holds the fields of the kind's status template.
	kindStatus map[string]any
	// unhealthy are the applied objects that kstatus does not call
	// current yet, failed ones first.
	unhealthy []engine.ObjectHealth
	// paced: a status write that only told of health was put off until
	// this much later (see statusPace).
	paced time.Duration
	// maps are the live objects of types cached whole that this reconcile
	// read, by IDOf, as maps (nil: not in the cache).
	maps map[string]map[string]any
	// fights are the corrections that wait because another writer keeps
	// changing the fields back.
	fights []engine.DeferredCorrection
	// templates and renderDigest: the version of the templates and the
	// render this reconcile applied in full (empty otherwise).
	templates, renderDigest string
	// ownedFields is the digest of the applied objects' baselines (see
	// restoreBaselines); empty when one is not known.
	ownedFields string
	// rollout: a paced rollout of new templates reached the resource now.
	rollout *v1alpha1.RolloutStatus
	// driftUnknown: the resource waits for the rollout, and what its
	// objects' field records say differs from status.ownedFields: fields
	// may have drifted before stencil began to keep them (see hold).
	driftUnknown bool
	// waiting: the change the new templates bring waits for its turn; the
	// reconcile applied nothing.
	waiting *pending
	// graphWaiting are the nodes of a graph kind that this render did not
	// render: their turn has not come.
	graphWaiting []render.Waiting
}

// pending is why a resource waits for a paced rollout.
type pending struct {
	reason, message, templates string
}

// failure is why a reconcile did not reach the desired state.
type failure struct {
	// reason is the condition reason (v1alpha1.Reason*).
	reason string
	err    error
	// stalled: retrying cannot help until someone changes the spec, the
	// templates or the object in the way (kstatus Stalled).
	stalled bool
}

// healthFailure is the reconcile's failure, or, when it has none, why its
// objects are not all healthy (nil when they are): Progressing while
// kstatus expects them to get there, HealthCheckFailed (Stalled) when it
// says one failed.
func (res *result) healthFailure() *failure {
	if res.failure != nil {
		return res.failure
	}
	if len(res.graphWaiting) > 0 {
		f := &failure{reason: v1alpha1.ReasonWaiting, err: errors.New(waitMessage(len(res.desired), res.graphWaiting))}
		if slices.ContainsFunc(res.graphWaiting, func(w render.Waiting) bool { return w.Failed }) {
			// Waiting will not help: what a node waits for failed.
			f.reason, f.stalled = v1alpha1.ReasonHealthCheckFailed, true
		}
		return f
	}
	if len(res.unhealthy) == 0 {
		return nil
	}
	f := &failure{reason: v1alpha1.ReasonProgressing, err: errors.New(healthMessage(len(res.desired), res.unhealthy))}
	if res.unhealthy[0].Failed {
		f.reason, f.stalled = v1alpha1.ReasonHealthCheckFailed, true
	}
	return f
}

// record records the first failure of the reconcile.
func (res *result) record(reason string, stalled bool, err error) {
	if res.failure == nil {
		res.failure = &failure{reason: reason, err: err, stalled: stalled}
	}
}

// also records a failure as record does, or, when the reconcile has one
// already, adds err to it: every object a reconcile had to leave is told.
func (res *result) also(reason string, stalled bool, err error) {
	if res.failure != nil {
		// One that a retry cannot fix makes the whole Stalled.
		res.failure.err = errors.Join(res.failure.err, err)
		res.failure.stalled = res.failure.stalled || stalled
		return
	}
	res.record(reason, stalled, err)
}

// fail is record, returning err for the reconcile to return.
func (res *result) fail(reason string, stalled bool, err error) error {
	res.record(reason, stalled, err)
	return err
}

// failQuietly is fail, but when err says the namespace is being deleted it
// records nothing and returns nil: the resource is about to go, and
// retrying would only fill the log.
func (res *result) failQuietly(ctx context.Context, reason string, err error) error {
	if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		ctrl.LoggerFrom(ctx).V(1).Info("Namespace is being deleted; leaving the resource alone", "error", err.Error())
		res.quiet = true
		return nil
	}
	return res.fail(reason, false, err)
}

// ok is true when every phase succeeded.
func (res *result) ok() bool {
	return res.failure == nil
}

var errEmptyRender = errors.New("the templates rendered no objects")

// ensureFinalizer adds the cleanup finalizer before any cluster-scoped object
// is applied.
func (r *Reconciler) ensureFinalizer(ctx context.Context, cr v1alpha1.Object, desired []*unstructured.Unstructured) error {
	if controllerutil.ContainsFinalizer(cr, finalizer) || !anyClusterScoped(desired) && !r.kind().HasGraph() {
		return nil
	}
	patch := finalizersPatch(cr)
	controllerutil.AddFinalizer(cr, finalizer)
	if err := r.client.Patch(ctx, cr, patch); err != nil {
		return fmt.Errorf("adding finalizer: %w", err)
	}
	return nil
}

// finalizersPatch is a merge patch from cr that carries cr's resourceVersion:
// a merge patch replaces the whole finalizers list, so without the lock it
// would drop a finalizer that another controller added meanwhile.
func finalizersPatch(cr v1alpha1.Object) client.Patch {
	return client.MergeFromWithOptions(cr.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
}

func anyClusterScoped(objs []*unstructured.Unstructured) bool {
	for _, o := range objs {
		if o.GetNamespace() == "" {
			return true
		}
	}
	return false
}

// finalizeAndReport finalizes cr and says in its status how that went:
// when it fails, Ready=False with reason CleanupFailed and what is left;
// when it succeeds after such a failure, Ready=False with reason Deleting
// (the resource may still wait for other finalizers). The status write has
// its own deadline, as in finish: a cleanup that ran out of time is
// reported too.
func (r *Reconciler) finalizeAndReport(ctx context.Context, cr v1alpha1.Object) error {
	pruned, err := r.finalize(ctx, cr)
	if apierrors.IsConflict(err) || errors.Is(err, fence.ErrFenced) || errors.Is(ctx.Err(), context.Canceled) {
		return err
	}
	res := &result{generation: cr.GetGeneration(), pruned: pruned}
	switch ready := meta.FindStatusCondition(cr.StencilStatus().Conditions, v1alpha1.ConditionReady); {
	case isStageLeft(err):
		res.record(v1alpha1.ReasonDeleting, false, err)
	case err != nil:
		res.record(v1alpha1.ReasonCleanupFailed, false, err)
	case ready != nil && ready.Reason == v1alpha1.ReasonCleanupFailed:
		res.record(v1alpha1.ReasonDeleting, false, errCleanedUp)
	default:
		return nil
	}
	current, serr := r.currentStatus(cr)
	if serr == nil {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statusWriteTimeout)
		defer cancel()
		serr = r.writeStatus(wctx, cr, current, res)
	}
	return errors.Join(err, serr)
}

// isStageLeft: a graph kind's resource still has objects to delete, in a
// later turn (their deletion events bring it back).
func isStageLeft(err error) bool {
	_, ok := errors.AsType[*stageLeft](err)
	return ok
}

var errCleanedUp = errors.New("stencil deleted the resource's cluster-scoped objects and removed its finalizer")

// finalize deletes the cluster-scoped objects of a custom resource being
// deleted (namespaced ones go with it through their ownerReference), then
// removes the finalizer. It returns what it deleted.
func (r *Reconciler) finalize(ctx context.Context, cr v1alpha1.Object) ([]v1alpha1.InventoryEntry, error) {
	if !controllerutil.ContainsFinalizer(cr, finalizer) {
		return nil, nil
	}
	orphaning, err := r.orphaning(ctx, cr)
	if err != nil {
		return nil, fmt.Errorf("cleaning up before deletion: %w", err)
	}
	var pruned []v1alpha1.InventoryEntry
	switch {
	case orphaning:
		// Deleted with propagationPolicy Orphan (kubectl delete
		// --cascade=orphan): every object stays; the garbage collector
		// removes their ownerReferences.
		r.leaveOrphans(ctx, cr)
	case r.kind().HasGraph():
		if pruned, err = r.deleteInOrder(ctx, cr); isStageLeft(err) {
			return pruned, err
		}
	default:
		pruned, err = r.applier.Prune(ctx, cr, nil, true)
	}
	if err != nil {
		return pruned, fmt.Errorf("cleaning up before deletion: %w", err)
	}
	patch := finalizersPatch(cr)
	controllerutil.RemoveFinalizer(cr, finalizer)
	if err := r.client.Patch(ctx, cr, patch); err != nil && !apierrors.IsNotFound(err) {
		return pruned, fmt.Errorf("removing finalizer: %w", err)
	}
	return pruned, nil
}

// overTime: a render stopped by its time limit.
func overTime(err error) bool {
	limit, ok := errors.AsType[*render.LimitError](err)
	return ok && limit.Limit == "render time"
}

// renderFailure is the reason of a failed render: LimitExceeded when one of
// the render limits stopped it, else RenderFailed.
func renderFailure(err error) string {
	if _, ok := errors.AsType[*render.LimitError](err); ok {
		return v1alpha1.ReasonLimitExceeded
	}
	return v1alpha1.ReasonRenderFailed
}
