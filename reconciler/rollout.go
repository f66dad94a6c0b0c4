package reconciler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// A paced rollout of template changes. With stencil the operator is its
// templates: a new version of them changes the desired state of every
// resource of a kind at once. A change that reaches a converged resource
// through the templates alone (its spec did not change) goes to at most
// RolloutOptions.Batch resources of the kind at a time; the next one goes
// when one of those is Ready. When one of them does not become Ready
// within RolloutOptions.Deadline, or kstatus says it failed, the rollout of
// the kind halts until that resource is Ready or gone. Spec changes, new
// resources and resources that were not Ready are never held back.
//
// Only what the new templates cause counts against a rollout: a resource it
// reached whose own spec changes since leaves the rollout's accounting (its
// failure is its own, and halts no one else's resources).
//
// A resource that waits keeps Ready=True (its objects are as they were, and
// healthy) with Reconciling=True, reason RolloutWaiting or RolloutHalted;
// stencil keeps its objects as the previous templates made them meanwhile
// (see hold: it corrects their drift, and applies nothing new) and looks
// again when its turn comes.
//
// What is rolling lives in this process; the resources it reached say so
// in status.rollout until they are Ready, and a new process (a restart, a
// new leader) takes those of its own version as rolling since then.

// RolloutOptions pace the rollout of template changes.
type RolloutOptions struct {
	// Batch is how many resources of a kind at a time may carry a template
	// change that has not made them Ready yet; 0 applies template changes
	// at once.
	Batch int
	// Deadline: a resource that is not Ready this long after a template
	// change reached it halts the rollout of its kind.
	Deadline time.Duration
}

// Defaults of RolloutOptions: the operator's flags start from these.
const (
	DefaultRolloutBatch    = 10
	DefaultRolloutDeadline = 10 * time.Minute
	// rolloutBackstop: a waiting resource looks again this soon even if
	// no turn was handed to it (it is woken when one is).
	rolloutBackstop = time.Minute
)

// rollout is the gate of one kind.
type rollout struct {
	kind      string
	templates string
	opts      RolloutOptions
	// wake enqueues resources (the controller watches it).
	wake chan event.GenericEvent
	// newObject is an empty custom resource of the kind, for wake events.
	newObject func() client.Object
	// list reads the kind's resources from the cache, once, to find what a
	// previous process left rolling.
	list func(context.Context) ([]v1alpha1.Object, error)

	mu     sync.Mutex
	seeded bool
	// readyBeforeSeed are the resources whose reconcile ended Ready before
	// the seed: the cache may still show them rolling.
	readyBeforeSeed map[types.NamespacedName]bool
	rolling         map[types.NamespacedName]*rolled
	waiting         []types.NamespacedName // in the order they came
}

// rolled is a resource that a template change reached.
type rolled struct {
	since time.Time
	// generation is the resource's generation that the change reached: a
	// newer one is a spec change, which takes it out of the rollout.
	generation int64
	// failed is how it failed (a sentence that says why); empty while it
	// may still become Ready.
	failed   string
	reported bool // the halt it caused has been told in an event
	timer    *time.Timer
}

// turn is what the gate says to one reconcile.
type turn struct {
	// wait: leave the resource's objects as they are.
	wait bool
	// halted (with wait): the rollout halted because of culprit, for why.
	halted  bool
	culprit types.NamespacedName
	why     string
	// started: the change reaches this resource now; since: when it did
	// (now, or earlier for a resource it reached before).
	started bool
	since   time.Time
}

func newRollout(kind, templates string, opts RolloutOptions) *rollout {
	return &rollout{kind: kind, templates: templates, opts: opts, wake: make(chan event.GenericEvent, 1024),
		rolling: map[types.NamespacedName]*rolled{}}
}

// paces reports whether the gate holds back template changes at all.
func (g *rollout) paces() bool { return g != nil && g.opts.Batch > 0 }

// templateChange reports whether desired (with digest renderDigest) brings a
// change of the templates alone to a converged resource: one that was
// applied with other templates, is Ready (waiting for its turn keeps it
// so), has no newer spec, and whose objects the new templates render
// otherwise.
func (g *rollout) templateChange(cr v1alpha1.Object, digest string) bool {
	s := cr.StencilStatus()
	if !g.paces() || s.Templates == "" || s.Templates == g.templates || s.RenderDigest == digest || cr.GetGeneration() != s.ObservedGeneration {
		return false
	}
	return meta.IsStatusConditionTrue(s.Conditions, v1alpha1.ConditionReady)
}

// admit decides for a resource of generation whose reconcile would bring
// it a change of the templates alone (change), and lets every other one
// pass.
func (g *rollout) admit(ctx context.Context, nn types.NamespacedName, generation int64, change bool) (turn, error) {
	if !g.paces() {
		return turn{}, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.seed(ctx); err != nil {
		return turn{}, err
	}
	g.leaveOnSpecChange(nn, generation)
	if e, ok := g.rolling[nn]; ok {
		g.dropWaiting(nn)
		return turn{since: e.since}, nil // reached already; this reconcile goes on with it
	}
	if !change {
		g.dropWaiting(nn)
		return turn{}, nil
	}
	if culprit, why, halted := g.haltedBy(); halted {
		g.addWaiting(nn)
		return turn{wait: true, halted: true, culprit: culprit, why: why}, nil
	}
	if len(g.rolling) >= g.opts.Batch {
		g.addWaiting(nn)
		return turn{wait: true}, nil
	}
	g.dropWaiting(nn)
	now := time.Now()
	g.start(nn, now, generation)
	rolledOut.WithLabelValues(g.kind).Inc()
	return turn{started: true, since: now}, nil
}

// leaveOnSpecChange takes nn out of the rollout when its spec changed
// since the change reached it: how it fares from now on is the doing of its
// spec, not of the templates. The caller holds g.mu.
func (g *rollout) leaveOnSpecChange(nn types.NamespacedName, generation int64) {
	if e, ok := g.rolling[nn]; ok && e.generation != generation {
		g.release(nn)
	}
}

// start records that the change reached nn, of generation, at since, and
// looks at it again at its deadline. The caller holds g.mu.
func (g *rollout) start(nn types.NamespacedName, since time.Time, generation int64) {
	e := &rolled{since: since, generation: generation}
	e.timer = time.AfterFunc(max(time.Until(since.Add(g.opts.Deadline)), 0)+time.Millisecond, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.rolling[nn] == e {
			// The deadline passed: the culprit reports the halt, the
			// waiting resources say they are halted.
			g.enqueue(append([]types.NamespacedName{nn}, g.waiting...))
			g.gauges()
		}
	})
	g.rolling[nn] = e
	g.gauges()
}

// seed takes, once, what a previous process left rolling. The caller holds
// g.mu.
func (g *rollout) seed(ctx context.Context) error {
	if g.seeded {
		return nil
	}
	crs, err := g.list(ctx)
	if err != nil {
		return fmt.Errorf("listing the %s resources for the rollout: %w", g.kind, err)
	}
	for _, cr := range crs {
		s := cr.StencilStatus()
		if s.Rollout == nil || s.Rollout.Templates != g.templates || cr.GetGeneration() != s.ObservedGeneration {
			continue // not reached by this version, or its spec changed since
		}
		nn := client.ObjectKeyFromObject(cr)
		if g.readyBeforeSeed[nn] {
			continue // the cache has not seen the status that said so yet
		}
		g.start(nn, s.Rollout.Started.Time, s.ObservedGeneration)
		if stalled := meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionStalled); stalled != nil && stalled.Status == metav1.ConditionTrue {
			g.rolling[nn].failed = describeFailure(stalled.Reason, stalled.Message)
		}
	}
	g.readyBeforeSeed = nil
	g.seeded = true
	return nil
}

// haltedBy is the rolled resource that halts the rollout (the one reached
// first, when several do), and why. The caller holds g.mu.
func (g *rollout) haltedBy() (types.NamespacedName, string, bool) {
	var culprit types.NamespacedName
	var first *rolled
	for nn, e := range g.rolling {
		if (e.failed != "" || time.Since(e.since) > g.opts.Deadline) && (first == nil || e.since.Before(first.since)) {
			culprit, first = nn, e
		}
	}
	if first == nil {
		return culprit, "", false
	}
	if first.failed != "" {
		return culprit, first.failed, true
	}
	return culprit, "it is not Ready " + g.opts.Deadline.String() + " after the change reached it", true
}

// settle records how the reconcile of a resource (of generation) the change
// reached ended, once its status says so: Ready lets the next resource go,
// a failure (failed, a sentence from describeFailure) halts the rollout. It
// reports a halt that nn causes and that no event has told yet.
func (g *rollout) settle(nn types.NamespacedName, generation int64, ready bool, failed string) (string, bool) {
	if !g.paces() {
		return "", false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.leaveOnSpecChange(nn, generation)
	e, ok := g.rolling[nn]
	if !ok {
		if ready && !g.seeded {
			if g.readyBeforeSeed == nil {
				g.readyBeforeSeed = map[types.NamespacedName]bool{}
			}
			g.readyBeforeSeed[nn] = true
		}
		return "", false
	}
	if ready {
		g.release(nn)
		return "", false
	}
	if failed != "" && e.failed == "" {
		e.failed = failed
		g.enqueue(g.waiting) // they say they are halted now
		g.gauges()
	}
	culprit, why, halted := g.haltedBy()
	if !halted || culprit != nn || e.reported {
		return "", false
	}
	e.reported = true
	return why, true
}

// describeFailure says how a resource the change reached failed, from its
// Stalled reason and message, for the halt's message and event: kstatus's
// verdict on an object, or the reconcile's own failure (a conflict over an
// object, a refused apply, a template error), each by its name.
func describeFailure(reason, message string) string {
	if reason == v1alpha1.ReasonHealthCheckFailed {
		return "kstatus says it failed: " + message
	}
	return "it is stalled (" + reason + "): " + message
}

// forget drops a deleted resource.
func (g *rollout) forget(nn types.NamespacedName) {
	if !g.paces() {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.dropWaiting(nn)
	if _, ok := g.rolling[nn]; ok {
		g.release(nn)
	}
	g.gauges()
}

// release ends nn's part in the rollout and hands its turn on: to every
// waiting resource when the rollout was halted (each says anew where it
// stands), else to as many as there are free turns. The caller holds g.mu.
func (g *rollout) release(nn types.NamespacedName) {
	was, _, wasHalted := g.haltedBy()
	g.rolling[nn].timer.Stop()
	delete(g.rolling, nn)
	culprit, _, halted := g.haltedBy()
	switch {
	case wasHalted && (!halted || culprit != was):
		g.enqueue(g.waiting) // each says anew where it stands
	case !halted:
		g.enqueue(g.waiting[:min(len(g.waiting), max(g.opts.Batch-len(g.rolling), 0))])
	}
	g.gauges()
}

// enqueue wakes resources, without waiting for the controller. The caller
// holds g.mu.
func (g *rollout) enqueue(nns []types.NamespacedName) {
	if len(nns) == 0 {
		return
	}
	objs := make([]client.Object, 0, len(nns))
	for _, nn := range nns {
		o := g.newObject()
		o.SetNamespace(nn.Namespace)
		o.SetName(nn.Name)
		objs = append(objs, o)
	}
	go func() {
		for _, o := range objs {
			g.wake <- event.GenericEvent{Object: o}
		}
	}()
}

// leave drops nn from the waiting resources; a reconcile that still waits
// adds it again.
func (g *rollout) leave(nn types.NamespacedName) {
	if !g.paces() {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.dropWaiting(nn)
}

func (g *rollout) addWaiting(nn types.NamespacedName) {
	if !slices.Contains(g.waiting, nn) {
		g.waiting = append(g.waiting, nn)
		g.gauges()
	}
}

func (g *rollout) dropWaiting(nn types.NamespacedName) {
	if i := slices.Index(g.waiting, nn); i >= 0 {
		g.waiting = slices.Delete(g.waiting, i, i+1)
		g.gauges()
	}
}

// gauges sets the kind's rollout gauges. The caller holds g.mu.
func (g *rollout) gauges() {
	_, _, halted := g.haltedBy()
	rolloutResources.WithLabelValues(g.kind, "rolling").Set(float64(len(g.rolling)))
	rolloutResources.WithLabelValues(g.kind, "waiting").Set(float64(len(g.waiting)))
	rolloutHalted.WithLabelValues(g.kind).Set(map[bool]float64{true: 1}[halted])
}

// waitMessage is the message of a resource the gate holds back.
func (g *rollout) waitMessage(v turn) string {
	const meanwhile = " Meanwhile stencil keeps its objects as the previous templates made them (it corrects their drift, and applies nothing new); a change of its spec is applied at once."
	if v.halted {
		return "The rollout of version " + g.templates + " of the " + g.kind + " templates is halted: " + v.culprit.String() +
			", which it reached, is not healthy (" + v.why + "). It goes on when " + v.culprit.String() +
			" is Ready or deleted; or roll stencil back to the previous templates." + meanwhile
	}
	return "Version " + g.templates + " of the " + g.kind + " templates changes this resource's objects and waits for its turn: stencil rolls template changes out to at most " +
		fmt.Sprint(g.opts.Batch) + " " + g.kind + " resources at a time, and to the next one when one of those is Ready." + meanwhile
}

// renderDigest is a digest of a render: every object's identity and desired
// hash, in order.
func renderDigest(objs []*unstructured.Unstructured) string {
	h := sha256.New()
	for _, o := range objs {
		hash := o.GetAnnotations()[v1alpha1.AnnotationDesiredHash]
		if createOnly(o) {
			hash = "" // never applied again: its render (a generated value) may differ every time
		}
		_, _ = fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%s\n", o.GetAPIVersion(), o.GetKind(), o.GetNamespace(), o.GetName(), hash)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))[:12]
}

// The rollout's metrics.
var (
	rolledOut = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stencil_rollout_started_total",
		Help: "Resources that a change of the templates alone reached through the paced rollout.",
	}, []string{"kind"})
	rolloutResources = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "stencil_rollout_resources",
		Help: "Resources in the paced rollout of a template change: rolling (reached, not Ready yet) or waiting for their turn.",
	}, []string{"kind", "state"})
	rolloutHalted = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "stencil_rollout_halted",
		Help: "1 while the rollout of a template change is halted because a resource it reached is not healthy.",
	}, []string{"kind"})
)
