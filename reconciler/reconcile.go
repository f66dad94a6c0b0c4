package reconciler

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/internal/fence"
	"github.com/stencil-operator/stencil/reconciler/engine"
)

// This file is the spine of a reconcile: read it top to bottom. Reconcile
// finds the resource and its claim; a live resource then goes through the
// phases in order, over one state; each phase says go on, or stop and
// when to look again; finish writes the status of what happened, and
// conclude turns the outcome into controller-runtime's result.

// Reconcile brings one custom resource to the state its templates render.
// The status it writes says what happened, on every path: a failure in any
// phase, and a panic, each have their own reason.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	r.swap.RLock() // one reconcile, one version of the templates
	defer r.swap.RUnlock()
	return conclude(ctx, r.reconcile(ctx, req.NamespacedName))
}

// reconcile is Reconcile before its outcome becomes a result.
func (r *Reconciler) reconcile(ctx context.Context, key types.NamespacedName) outcome {
	cr := r.kind().New()
	if err := r.client.Get(ctx, key, cr); apierrors.IsNotFound(err) {
		return r.gone(ctx, key)
	} else if err != nil {
		return stopWith(err)
	}
	if o := r.claim(ctx, cr); o.stop {
		return o
	}
	// Its objects' events find it by this UID (see ownerOf).
	r.owners.Store(cr.GetUID(), key)
	r.memory.noteUID(key, cr.GetUID())
	if !cr.GetDeletionTimestamp().IsZero() {
		return r.cleanUp(ctx, cr)
	}
	s, err := r.begin(cr)
	if err != nil {
		return stopWith(err)
	}
	return r.reconcileLive(ctx, s)
}

// state is what one reconcile of a live resource knows, phase by phase.
type state struct {
	cr  v1alpha1.Object
	key types.NamespacedName
	// before is the resource's status as read, as a map (what a status
	// write is compared with).
	before map[string]any
	// res is what the reconcile saw and did: the status is computed from it.
	res *result
	// writer writes the resource's objects: its ServiceAccount's client,
	// or nil for stencil's own (set by the act-as phase).
	writer client.Client
	// digest is the render's digest (set by the gate).
	digest string
	// applied is what the apply phase reported.
	applied engine.ApplyOutcome
}

// begin is the state of a reconcile of cr.
func (r *Reconciler) begin(cr v1alpha1.Object) (*state, error) {
	before, err := r.currentStatus(cr)
	if err != nil {
		return nil, err
	}
	return &state{cr: cr, key: client.ObjectKeyFromObject(cr), before: before, res: &result{generation: cr.GetGeneration()}}, nil
}

// writes is ctx for the writes of the resource's objects: made by s.writer
// when one is set (engine.WithWriter).
func (s *state) writes(ctx context.Context) context.Context {
	if s.writer == nil {
		return ctx
	}
	return engine.WithWriter(ctx, s.writer)
}

// phase is one step of a reconcile of a live resource.
type phase struct {
	name string
	run  func(r *Reconciler, ctx context.Context, s *state) outcome
}

// phases are the steps of a reconcile of a live resource, in order. Each
// records in s.res what it saw; the first that stops ends the reconcile.
var phases = []phase{
	{"types", (*Reconciler).checkTypes},         // every type the kind needs is served (served.go)
	{"render", (*Reconciler).renderPhase},       // the spec into desired objects (render.go, graph.go)
	{"act as", (*Reconciler).actAsPhase},        // who writes them, and may it (tenant.go)
	{"gate", (*Reconciler).gatePhase},           // a change of the templates alone waits its turn (gate.go, hold.go)
	{"finalizer", (*Reconciler).finalizerPhase}, // before any object it must clean up (finalizer.go)
	{"apply", (*Reconciler).applyPhase},         // server-side apply of what needs it (apply.go, engine)
	{"blocked", (*Reconciler).blockedPhase},     // what the apply had to leave: nothing is pruned then (apply.go)
	{"prune", (*Reconciler).prunePhase},         // the objects the render no longer holds (claim.go, engine)
	{"observe", (*Reconciler).observePhase},     // the kind's status template (observe.go)
	{"health", (*Reconciler).healthPhase},       // kstatus of the applied objects (health.go)
}

// reconcileLive runs the phases, then finish writes the status of what
// they saw, even after a panic.
func (r *Reconciler) reconcileLive(ctx context.Context, s *state) (o outcome) {
	defer func() {
		if p := recover(); p != nil {
			ctrl.LoggerFrom(ctx).Error(fmt.Errorf("%v", p), "Reconcile panicked", "stack", string(debug.Stack()))
			o = stopWith(s.res.fail(v1alpha1.ReasonReconcilePanicked, false, fmt.Errorf("the reconcile panicked: %v", p)))
		}
		o = r.finish(ctx, s, o)
	}()
	r.rollout.Leave(s.key) // the gate adds it again if it still waits
	for _, p := range phases {
		if o := p.run(r, ctx, s); o.stop {
			ctrl.LoggerFrom(ctx).V(2).Info("Reconcile stopped", "phase", p.name, "requeueAfter", o.after)
			return o
		}
	}
	res := s.res
	if len(res.applied)+len(res.pruned) > 0 {
		ctrl.LoggerFrom(ctx).V(1).Info("Reconciled", "objects", s.applied.Tally(), "pruned", len(res.pruned), "cr", klog.KObj(s.cr))
	}
	return lookAgain(nextLook(res, s.applied.Waiting))
}

// outcome is how a reconcile, or one of its phases, ended.
type outcome struct {
	// stop: the reconcile ends here (a phase that goes on returns the
	// zero outcome).
	stop bool
	// after: look again this soon, even if no event comes (0: only when
	// one comes).
	after time.Duration
	// err is retried with controller-runtime's backoff; a fenced write
	// (fence.ErrFenced) ends the reconcile quietly instead (conclude).
	err error
}

// goOn is the outcome of a phase after which the next runs.
var goOn = outcome{}

// lookAgain stops, and looks again after d (0: only when an event comes).
func lookAgain(d time.Duration) outcome { return outcome{stop: true, after: d} }

// stopWith stops with err (nil: nothing to retry).
func stopWith(err error) outcome { return outcome{stop: true, err: err} }

// conclude turns an outcome into controller-runtime's result. It is the
// one place that handles a write the leader fence refused.
func conclude(ctx context.Context, o outcome) (reconcile.Result, error) {
	if errors.Is(o.err, fence.ErrFenced) {
		return fence.Requeue(ctx, o.err)
	}
	return reconcile.Result{RequeueAfter: o.after}, o.err
}

// gone: the resource was deleted, or moved to another shard, which then
// waits for this shard's claim.
func (r *Reconciler) gone(ctx context.Context, key types.NamespacedName) outcome {
	r.forget(key)
	return stopWith(r.release(ctx, key))
}

// claim stops the reconcile of a resource that this shard does not hold
// (another shard does, or taking it failed).
func (r *Reconciler) claim(ctx context.Context, cr v1alpha1.Object) outcome {
	ok, err := r.claimed(ctx, cr)
	if ok && err == nil {
		return goOn
	}
	if err == nil {
		r.memory.forgetHeld(client.ObjectKeyFromObject(cr)) // another shard's now
	}
	return outcome{stop: true, after: claimRetry, err: err}
}

// cleanUp finalizes a resource being deleted.
func (r *Reconciler) cleanUp(ctx context.Context, cr v1alpha1.Object) outcome {
	r.rollout.Forget(client.ObjectKeyFromObject(cr))
	if err := r.writable(); err != nil {
		return stopWith(err)
	}
	err := r.finalizeAndReport(ctx, cr)
	if isStageLeft(err) && !errors.Is(err, fence.ErrFenced) {
		// The deletions' events bring it back; this is the backstop (an
		// object of a type no longer declared has no informer).
		return lookAgain(cacheBackstop)
	}
	return stopWith(err)
}

// finish writes the status of what the phases saw, unless the namespace is
// going away, with a deadline of its own (the reconcile's may have
// passed), and reconciles again at once when another writer changed an
// object while we wrote it: even after a failure a retry cannot fix, as
// that write may be the fix.
func (r *Reconciler) finish(ctx context.Context, s *state, o outcome) outcome {
	if errors.Is(o.err, fence.ErrFenced) {
		return o
	}
	res := s.res
	countObjects(r.kind().GroupVersionKind().Kind, res)
	if res.quiet || errors.Is(ctx.Err(), context.Canceled) {
		// Nothing to tell, or shutting down / no longer the leader: say
		// nothing rather than record the cancellation as a failure.
		return o
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statusWriteTimeout)
	defer cancel()
	werr := r.writeStatus(wctx, s.cr, s.before, res)
	if errors.Is(werr, fence.ErrFenced) {
		return stopWith(werr)
	}
	o.err = errors.Join(o.err, werr)
	if res.paced > 0 && o.err == nil {
		o.after = soonest(o.after, res.paced)
	}
	if res.paced == 0 && werr == nil {
		r.settleRollout(ctx, s.cr, res) // its status says how it went
	}
	return r.afterOthersWrote(s, o)
}

// afterOthersWrote looks again at once (backing off while it keeps
// happening) when another writer changed an object while we wrote it.
func (r *Reconciler) afterOthersWrote(s *state, o outcome) outcome {
	if !s.res.othersWrote {
		r.rewrites.Forget(s.key)
		return o
	}
	if errors.Is(o.err, reconcile.TerminalError(nil)) {
		o.err = nil
	}
	if wait := r.rewrites.When(s.key); o.err == nil {
		o.after = soonest(o.after, wait)
	}
	return o
}

// writable asks Options.MayWrite whether this process may write now.
func (r *Reconciler) writable() error {
	if r.mayWrite == nil {
		return nil
	}
	return r.mayWrite()
}

// Timings of a reconcile; each phase's own are beside it.
const (
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
	// claimRetry: a resource another shard still holds is looked at again
	// this soon (that shard's release also wakes it).
	claimRetry = time.Second
	// raceRetry: an object changed between stencil's read and its write;
	// the resource looks again this soon.
	raceRetry = time.Second
)
