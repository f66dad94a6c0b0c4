package reconciler

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/reconciler/engine"
	"github.com/stencil-operator/stencil/reconciler/fence"
	"github.com/stencil-operator/stencil/reconciler/rollout"
	"github.com/stencil-operator/stencil/render"
)

// This file is the spine of a reconcile: read it top to bottom. Reconcile
// finds the resource and its claim; a live resource then goes through the
// phases in order, over one state (a resource being deleted goes through
// the deletion phases of finalizer.go instead, by the same runner, run);
// each phase, below in that order, says go on, or stop, when to look again
// and why it failed (the work it calls is in the file the phases table
// names); finish writes the status of what happened, and conclude turns
// the outcome into controller-runtime's result.

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
		return r.reconcileDeleted(ctx, cr)
	}
	if why, ok := cr.GetAnnotations()[v1alpha1.AnnotationConversionFailed]; ok {
		// A list's placeholder of a resource whose conversion failed
		// (read at a version other than its stored one): there is no spec
		// to render from, so nothing is applied or pruned. (Its deletion
		// goes on: it reads no spec.)
		ctrl.LoggerFrom(ctx).Error(nil, "The resource did not convert to the version stencil reads; it is not reconciled until it does", "reason", why)
		return lookAgain(cacheBackstop)
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
	// digest is the render's digest (set by the render phase): the gate
	// compares it with the one in status, which records it.
	digest string
	// applied is what the apply phase reported.
	applied engine.ApplyOutcome
	// next is when to look again even if no event comes (0: only when one
	// comes), once every phase went on (set by the blocked phase).
	next time.Duration
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

// phase is one step of a reconcile: of a live resource (phases) or of one
// being deleted (deletionPhases).
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
func (r *Reconciler) reconcileLive(ctx context.Context, s *state) outcome {
	r.rollout.Leave(s.key) // the gate adds it again if it still waits
	return r.run(ctx, s, phases, (*Reconciler).finish)
}

// run runs steps in order over s until one stops, then finish, even after
// a panic. It is the one place a failure is recorded: the outcome of the
// step that stopped carries it.
func (r *Reconciler) run(ctx context.Context, s *state, steps []phase, finish func(*Reconciler, context.Context, *state, outcome) outcome) (o outcome) {
	defer func() {
		if p := recover(); p != nil {
			ctrl.LoggerFrom(ctx).Error(fmt.Errorf("%v", p), "Reconcile panicked", "stack", string(debug.Stack()))
			o = failed(v1alpha1.ReasonReconcilePanicked, false, fmt.Errorf("the reconcile panicked: %v", p))
			s.res.failure = o.failure
		}
		o = finish(r, ctx, s, o)
	}()
	for _, p := range steps {
		if o := p.run(r, ctx, s); o.stop {
			ctrl.LoggerFrom(ctx).V(2).Info("Reconcile stopped", "phase", p.name, "requeueAfter", o.after)
			s.res.failure = o.failure
			return o
		}
	}
	return lookAgain(s.next)
}

// The phases, in order.

// checkTypes stops the reconcile while a type the kind needs is not
// served: someone must install a CRD; awaitTypes brings the resource back
// then.
func (r *Reconciler) checkTypes(_ context.Context, s *state) outcome {
	if err := r.types.notServed(); err != nil {
		return failed(v1alpha1.ReasonTypeNotServed, true, err).retryAfter(0)
	}
	return goOn
}

// renderPhase renders the resource's spec into its desired objects (a
// graph kind: only the nodes whose turn came). A failed or empty render
// stops the reconcile: nothing is applied or pruned after it.
func (r *Reconciler) renderPhase(ctx context.Context, s *state) outcome {
	plan, err := r.renderPlan(ctx, s.cr)
	if err != nil {
		ctrl.LoggerFrom(ctx).Info("Render failed", "error", err.Error())
		return renderFailed(err)
	}
	s.res.desired, s.res.graphWaiting = plan.Objects, plan.Waiting
	s.res.rendered, s.res.once, s.res.done = true, plan.Once, plan.Done
	if len(s.res.graphWaiting) == 0 && engine.EmptyRender(s.cr, append(slices.Clip(s.res.desired), s.res.done...)) {
		return failed(v1alpha1.ReasonEmptyRender, true, errEmptyRender).retryAfter(0)
	}
	s.digest = renderDigest(s.res.desired)
	return goOn
}

// renderFailed is the outcome of a failed render, with its reason and
// when to try again: a template's error waits for a change of the spec or
// of the templates; what may pass by itself is retried.
func renderFailed(err error) outcome {
	if apierrors.IsForbidden(err) {
		// An input stencil (or the resource's ServiceAccount) may not
		// read: no event tells of a new RoleBinding.
		return failed(v1alpha1.ReasonForbidden, true, err).retryAfter(forbiddenRetry)
	}
	if isGeneratedError(err) {
		return failed(v1alpha1.ReasonGeneratedValuesFailed, false, err)
	}
	if _, ok := errors.AsType[*render.ReadError](err); ok {
		// Reading an input failed (a timeout, a throttled API server):
		// retried with backoff, unlike a template's error.
		return failed(v1alpha1.ReasonInputReadFailed, false, err)
	}
	if overTime(err) {
		// The clock, not the spec, may be to blame (a loaded node):
		// retried with backoff.
		return failed(v1alpha1.ReasonLimitExceeded, true, err)
	}
	if _, ok := errors.AsType[*readFailure](err); ok {
		// The template may have failed on what it read: a change of an
		// input or of a node's object renders it again (the watch holds
		// what it read); this is the backstop.
		return failed(renderFailure(err), true, err).retryAfter(wait.Jitter(readFailureRetry, 0.2))
	}
	// A retry cannot fix a template error; a spec change triggers a new reconcile.
	return failed(renderFailure(err), true, err).terminal()
}

// actAsPhase finds who writes the resource's objects and checks that it may
// write every one the render holds: when it may not, nothing is applied or
// pruned, and the resource looks again later (no event tells of a new
// RoleBinding).
func (r *Reconciler) actAsPhase(ctx context.Context, s *state) outcome {
	writer, refused, err := r.actAs(ctx, s.cr, s.res.desired)
	if err != nil {
		reason := v1alpha1.ReasonApplyFailed
		if apierrors.IsForbidden(err) {
			reason = v1alpha1.ReasonForbidden // stencil may not act as it
		}
		return failed(reason, false, fmt.Errorf("checking what the resource's ServiceAccount may do: %w", err))
	}
	if refused != nil {
		return failed(v1alpha1.ReasonForbidden, true, refused).retryAfter(forbiddenRetry)
	}
	s.writer = writer
	return goOn
}

// gatePhase asks the rollout gate whether this reconcile may apply what the
// templates alone changed. While the resource waits for its turn, its
// objects are held as the previous templates made them (hold.go) and
// nothing is applied. Without pacing (--rollout-batch 0)
// every reconcile goes on.
func (r *Reconciler) gatePhase(ctx context.Context, s *state) outcome {
	if !r.rollout.Paces() {
		return goOn
	}
	waiting, err := r.awaitTurn(ctx, s.cr, s.res, s.digest)
	if err != nil {
		return quietly(err) // nothing happened; the retry looks again
	}
	if !waiting {
		r.memory.forgetHeld(s.key) // its turn came, or never had to
		return goOn
	}
	err = r.hold(s.writes(ctx), s.cr, s.res)
	if errors.Is(err, engine.ErrChangedWhileRead) {
		return quietly(nil).retryAfter(raceRetry)
	}
	if err != nil {
		return stopWith(err)
	}
	return lookAgain(wait.Jitter(rollout.Backstop, 0.2))
}

// finalizerPhase adds the cleanup finalizer before any object that needs it
// is applied (see ensureFinalizer).
func (r *Reconciler) finalizerPhase(ctx context.Context, s *state) outcome {
	if err := r.writable(); err != nil {
		return stopWith(err) // fenced: nothing said
	}
	err := r.ensureFinalizer(ctx, s.cr, s.res.desired)
	if apierrors.IsConflict(err) {
		// The resource changed since the cache saw it: nothing happened
		// that status should tell; the retry reads the new version.
		return quietly(err)
	}
	if err != nil {
		return failedUnlessGoing(ctx, v1alpha1.ReasonFinalizerFailed, err)
	}
	return goOn
}

// applyPhase server-side-applies the desired objects that need it (the
// engine decides which: missing, changed, or drifted), as s.writer.
func (r *Reconciler) applyPhase(ctx context.Context, s *state) outcome {
	out, err := r.applier.Apply(s.writes(ctx), s.cr, s.res.desired)
	if errors.Is(err, fence.ErrFenced) {
		return stopWith(err) // nothing counted: finish ends it quietly
	}
	s.applied = out
	res := s.res
	res.applied, res.live, res.drift, res.othersWrote, res.fights = out.Applied(), out.Live(), out.Drift(), out.OthersWrote, out.Deferred()
	for _, d := range res.fights {
		res.drift = append(res.drift, d.Drift)
	}
	countFights(r.kind().GroupVersionKind().Kind, out.FightsStarted, out.FightCorrections)
	r.tellAdopted(ctx, s.cr, out.Adopted())
	if errors.Is(err, engine.ErrAdoptionRaced) || errors.Is(err, engine.ErrChangedWhileRead) {
		ctrl.LoggerFrom(ctx).Info("An object changed between stencil's read and its apply; looking again", "error", err.Error())
		return quietly(nil).retryAfter(raceRetry)
	}
	if err != nil {
		// Rejections before the failure are told with it.
		return failedUnlessGoing(ctx, v1alpha1.ReasonApplyFailed, errors.Join(r.withholdSecretData(res.desired, append([]error{err}, out.Rejected()...))...))
	}
	return goOn
}

// tellAdopted logs, and records an event for, each object the apply took
// over on request.
func (r *Reconciler) tellAdopted(ctx context.Context, cr v1alpha1.Object, adopted []string) {
	for _, o := range adopted {
		ctrl.LoggerFrom(ctx).Info("Adopted an existing object on request", "object", o)
		r.recorder.Eventf(cr, nil, corev1.EventTypeNormal, "Adopted", "Adopt", "Took over %s, which was annotated %s", o, v1alpha1.AnnotationAdopt)
	}
}

// blockedPhase stops, and nothing is pruned, when the apply had to leave an
// object short of its desired state (see leaveBlocked); else it records
// what this reconcile applied in full, and when to look again (a fight's
// wait, the cache behind an apply).
func (r *Reconciler) blockedPhase(ctx context.Context, s *state) outcome {
	retry, blocked := r.leaveBlocked(ctx, s.cr, s.res, s.applied)
	if blocked != nil {
		return stopFailed(blocked).retryAfter(retry)
	}
	s.next = retry
	s.res.templates, s.res.renderDigest = r.kind().Templates(), s.digest
	s.res.ownedFields = r.applier.OwnedDigest(s.res.desired)
	return goOn
}

// prunePhase deletes the objects the render no longer holds. While nodes
// of a graph wait, nothing is pruned: their objects stay as they are,
// whatever they carry (an object from before the kind had a graph has no
// node annotation).
func (r *Reconciler) prunePhase(ctx context.Context, s *state) outcome {
	if len(s.res.graphWaiting) > 0 {
		return goOn
	}
	// A once node's objects that are gone stay gone, and are not pruned
	// should the cache still show them.
	pruned, err := r.pruneAfterClaim(s.writes(ctx), s.cr, append(slices.Clip(s.res.desired), s.res.done...))
	s.res.pruned = pruned
	if err != nil {
		return failed(v1alpha1.ReasonPruneFailed, false, err)
	}
	return goOn
}

// observePhase runs the kind's status template over the applied objects.
func (r *Reconciler) observePhase(ctx context.Context, s *state) outcome {
	var err error
	if s.res.kindStatus, err = r.kindStatus(ctx, s.cr, s.res); err != nil {
		// The objects are applied; what the status template reads changes
		// with them, so this is retried like any status failure.
		return failed(v1alpha1.ReasonStatusTemplateFailed, false, err)
	}
	return goOn
}

// healthPhase judges the applied objects with kstatus.
func (r *Reconciler) healthPhase(ctx context.Context, s *state) outcome {
	var err error
	if s.res.unhealthy, err = r.health(ctx, s.res); err != nil {
		// Not a failure of the reconcile: the objects are applied. Ready
		// says the object could not be read; the retry reads it again.
		return stopWith(err)
	}
	return goOn
}

// outcome is how a reconcile, or one of its phases, ended: the one value
// that says so. A phase that fails says why in it (failed), and the runner
// records that; no phase writes a failure anywhere else.
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
	// failure is why the reconcile did not reach the desired state: its
	// status says so (nil: nothing failed).
	failure *failure
	// quiet: nothing happened that status should tell (the namespace is
	// being deleted, the resource or an object changed under a write);
	// no status is written.
	quiet bool
}

// goOn is the outcome of a phase after which the next runs.
var goOn = outcome{}

// lookAgain stops, and looks again after d (0: only when an event comes).
func lookAgain(d time.Duration) outcome { return outcome{stop: true, after: d} }

// stopWith stops with err (nil: nothing to retry).
func stopWith(err error) outcome { return outcome{stop: true, err: err} }

// failed stops with a failure of reason; err is retried with backoff
// unless retryAfter or terminal say otherwise. stalled: a retry cannot
// help until someone changes the spec, the templates or the object in the
// way (kstatus Stalled).
func failed(reason string, stalled bool, err error) outcome {
	return stopFailed(&failure{reason: reason, err: err, stalled: stalled})
}

// stopFailed stops with failure f.
func stopFailed(f *failure) outcome { return outcome{stop: true, err: f.err, failure: f} }

// failedUnlessGoing is failed, but when err says the namespace is being
// deleted it stops quietly, with nothing to retry: the resource is about
// to go, and retrying would only fill the log.
func failedUnlessGoing(ctx context.Context, reason string, err error) outcome {
	if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		ctrl.LoggerFrom(ctx).V(1).Info("Namespace is being deleted; leaving the resource alone", "error", err.Error())
		return quietly(nil)
	}
	return failed(reason, false, err)
}

// quietly stops with err, and no status is written.
func quietly(err error) outcome { return outcome{stop: true, err: err, quiet: true} }

// retryAfter is o without backoff: it looks again after d (0: only when an
// event comes). Its failure, if any, is still told.
func (o outcome) retryAfter(d time.Duration) outcome {
	o.err, o.after = nil, d
	return o
}

// terminal is o with its error not retried: a change of the spec or the
// templates brings the resource back.
func (o outcome) terminal() outcome {
	o.err = reconcile.TerminalError(o.err)
	return o
}

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
	if log := ctrl.LoggerFrom(ctx).V(1); log.Enabled() && !o.quiet && o.err == nil && res.failure == nil && len(res.applied)+len(res.pruned) > 0 {
		log.Info("Reconciled", "objects", s.applied.Tally(), "pruned", len(res.pruned), "cr", klog.KObj(s.cr))
	}
	if o.quiet || errors.Is(ctx.Err(), context.Canceled) {
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
	if res.paced == 0 && werr == nil && r.rollout.Paces() {
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
