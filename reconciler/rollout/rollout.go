package rollout

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// A paced rollout of template changes. With stencil the operator is its
// templates: a new version of them changes the desired state of every
// resource of a kind at once. A change that reaches a converged resource
// through the templates alone (its spec did not change) goes to at most
// Options.Batch resources of the kind at a time; the next one goes
// when one of those is Ready. When one of them does not become Ready
// within Options.Deadline, or kstatus says it failed, the rollout of
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

// Options pace the rollout of template changes.
type Options struct {
	// Batch is how many resources of a kind at a time may carry a template
	// change that has not made them Ready yet; 0 applies template changes
	// at once.
	Batch int
	// Deadline: a resource that is not Ready this long after a template
	// change reached it halts the rollout of its kind.
	Deadline time.Duration
}

// Defaults of Options: the operator's flags start from these.
const (
	DefaultBatch    = 10
	DefaultDeadline = 10 * time.Minute
	// Backstop: a waiting resource looks again this soon even if
	// no turn was handed to it (it is woken when one is).
	Backstop = time.Minute
)

// Gate is the paced rollout of one kind: it hands out turns to the
// resources that a change of the templates alone reaches.
type Gate struct {
	kind      string
	templates string
	Opts      Options
	// Wake enqueues resources (the controller watches it).
	Wake chan event.GenericEvent
	// NewObject is an empty custom resource of the kind, for wake events.
	NewObject func() client.Object
	// List reads the kind's resources from the cache, once, to find what a
	// previous process left rolling.
	List func(context.Context) ([]v1alpha1.Object, error)

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

// Turn is what the gate says to one reconcile.
type Turn struct {
	// Wait: leave the resource's objects as they are.
	Wait bool
	// Halted (with wait): the rollout halted because of culprit, for why.
	Halted  bool
	culprit types.NamespacedName
	why     string
	// Started: the change reaches this resource now; since: when it did
	// (now, or earlier for a resource it reached before).
	Started bool
	Since   time.Time
}

// New is the gate of kind, whose templates have the digest templates.
func New(kind, templates string, opts Options) *Gate {
	startRolloutCounters(kind)
	return &Gate{kind: kind, templates: templates, Opts: opts, Wake: make(chan event.GenericEvent, 1024),
		rolling: map[types.NamespacedName]*rolled{}}
}

// NewVersion makes templates the version the gate rolls out: the
// templates were reloaded while stencil runs (--reload-templates). As a
// restart with them would, it drops what was rolling or waiting for the
// previous version: a resource that version reached and that is not Ready
// no longer holds the new one back. The waiting ones are woken.
func (g *Gate) NewVersion(templates string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.templates = templates
	for nn, e := range g.rolling {
		e.timer.Stop()
		delete(g.rolling, nn)
	}
	g.enqueue(g.waiting)
	g.waiting = nil
	g.gauges()
}

// version is the version of the templates the gate rolls out.
func (g *Gate) version() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.templates
}

// Paces reports whether the gate holds back template changes at all.
func (g *Gate) Paces() bool { return g != nil && g.Opts.Batch > 0 }

// TemplateChange reports whether desired (whose render has digest digest) brings a
// change of the templates alone to a converged resource: one that was
// applied with other templates, is Ready (waiting for its turn keeps it
// so), has no newer spec, and whose objects the new templates render
// otherwise.
func (g *Gate) TemplateChange(cr v1alpha1.Object, digest string) bool {
	s := cr.StencilStatus()
	if !g.Paces() || s.Templates == "" || s.Templates == g.version() || s.RenderDigest == digest || cr.GetGeneration() != s.ObservedGeneration {
		return false
	}
	return meta.IsStatusConditionTrue(s.Conditions, v1alpha1.ConditionReady)
}

// Admit decides for a resource of generation whose reconcile would bring
// it a change of the templates alone (change), and lets every other one
// pass.
func (g *Gate) Admit(ctx context.Context, nn types.NamespacedName, generation int64, change bool) (Turn, error) {
	if !g.Paces() {
		return Turn{}, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.seed(ctx); err != nil {
		return Turn{}, err
	}
	g.leaveOnSpecChange(nn, generation)
	if e, ok := g.rolling[nn]; ok {
		g.dropWaiting(nn)
		return Turn{Since: e.since}, nil // reached already; this reconcile goes on with it
	}
	if !change {
		g.dropWaiting(nn)
		return Turn{}, nil
	}
	if culprit, why, halted := g.haltedBy(); halted {
		g.addWaiting(nn)
		return Turn{Wait: true, Halted: true, culprit: culprit, why: why}, nil
	}
	if len(g.rolling) >= g.Opts.Batch {
		g.addWaiting(nn)
		return Turn{Wait: true}, nil
	}
	g.dropWaiting(nn)
	now := time.Now()
	g.start(nn, now, generation)
	rolledOut.WithLabelValues(g.kind).Inc()
	return Turn{Started: true, Since: now}, nil
}

// leaveOnSpecChange takes nn out of the rollout when its spec changed
// since the change reached it: how it fares from now on is the doing of its
// spec, not of the templates. The caller holds g.mu.
func (g *Gate) leaveOnSpecChange(nn types.NamespacedName, generation int64) {
	if e, ok := g.rolling[nn]; ok && e.generation != generation {
		g.release(nn)
	}
}

// start records that the change reached nn, of generation, at since, and
// looks at it again at its deadline. The caller holds g.mu.
func (g *Gate) start(nn types.NamespacedName, since time.Time, generation int64) {
	e := &rolled{since: since, generation: generation}
	e.timer = time.AfterFunc(max(time.Until(since.Add(g.Opts.Deadline)), 0)+time.Millisecond, func() {
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
func (g *Gate) seed(ctx context.Context) error {
	if g.seeded {
		return nil
	}
	crs, err := g.List(ctx)
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
			g.rolling[nn].failed = DescribeFailure(stalled.Reason, stalled.Message)
		}
	}
	g.readyBeforeSeed = nil
	g.seeded = true
	return nil
}

// haltedBy is the rolled resource that halts the rollout (the one reached
// first, when several do), and why. The caller holds g.mu.
func (g *Gate) haltedBy() (types.NamespacedName, string, bool) {
	var culprit types.NamespacedName
	var first *rolled
	for nn, e := range g.rolling {
		if (e.failed != "" || time.Since(e.since) > g.Opts.Deadline) && (first == nil || e.since.Before(first.since)) {
			culprit, first = nn, e
		}
	}
	if first == nil {
		return culprit, "", false
	}
	if first.failed != "" {
		return culprit, first.failed, true
	}
	return culprit, "it is not Ready " + g.Opts.Deadline.String() + " after the change reached it", true
}

// Settle records how the reconcile of a resource (of generation) the change
// reached ended, once its status says so: Ready lets the next resource go,
// a failure (failed, a sentence from DescribeFailure) halts the rollout. It
// reports a halt that nn causes and that no event has told yet.
func (g *Gate) Settle(nn types.NamespacedName, generation int64, ready bool, failed string) (string, bool) {
	if !g.Paces() {
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

// DescribeFailure says how a resource the change reached failed, from its
// Stalled reason and message, for the halt's message and event: kstatus's
// verdict on an object, or the reconcile's own failure (a conflict over an
// object, a refused apply, a template error), each by its name.
func DescribeFailure(reason, message string) string {
	if reason == v1alpha1.ReasonHealthCheckFailed {
		return "kstatus says it failed: " + message
	}
	return "it is stalled (" + reason + "): " + message
}

// Forget drops a deleted resource.
func (g *Gate) Forget(nn types.NamespacedName) {
	if !g.Paces() {
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
func (g *Gate) release(nn types.NamespacedName) {
	was, _, wasHalted := g.haltedBy()
	g.rolling[nn].timer.Stop()
	delete(g.rolling, nn)
	culprit, _, halted := g.haltedBy()
	switch {
	case wasHalted && (!halted || culprit != was):
		g.enqueue(g.waiting) // each says anew where it stands
	case !halted:
		g.enqueue(g.waiting[:min(len(g.waiting), max(g.Opts.Batch-len(g.rolling), 0))])
	}
	g.gauges()
}

// enqueue wakes resources, without waiting for the controller. The caller
// holds g.mu.
func (g *Gate) enqueue(nns []types.NamespacedName) {
	if len(nns) == 0 {
		return
	}
	objs := make([]client.Object, 0, len(nns))
	for _, nn := range nns {
		o := g.NewObject()
		o.SetNamespace(nn.Namespace)
		o.SetName(nn.Name)
		objs = append(objs, o)
	}
	go func() {
		for _, o := range objs {
			g.Wake <- event.GenericEvent{Object: o}
		}
	}()
}

// Leave drops nn from the waiting resources; a reconcile that still waits
// adds it again.
func (g *Gate) Leave(nn types.NamespacedName) {
	if !g.Paces() {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.dropWaiting(nn)
}

func (g *Gate) addWaiting(nn types.NamespacedName) {
	if !slices.Contains(g.waiting, nn) {
		g.waiting = append(g.waiting, nn)
		g.gauges()
	}
}

func (g *Gate) dropWaiting(nn types.NamespacedName) {
	if i := slices.Index(g.waiting, nn); i >= 0 {
		g.waiting = slices.Delete(g.waiting, i, i+1)
		g.gauges()
	}
}

// gauges sets the kind's rollout gauges. The caller holds g.mu.
func (g *Gate) gauges() {
	_, _, halted := g.haltedBy()
	rolloutResources.WithLabelValues(g.kind, "rolling").Set(float64(len(g.rolling)))
	rolloutResources.WithLabelValues(g.kind, "waiting").Set(float64(len(g.waiting)))
	rolloutHalted.WithLabelValues(g.kind).Set(map[bool]float64{true: 1}[halted])
}

// WaitMessage is the message of a resource the gate holds back.
func (g *Gate) WaitMessage(v Turn) string {
	templates := g.version()
	const meanwhile = " Meanwhile stencil keeps its objects as the previous templates made them (it corrects their drift, and applies nothing new); a change of its spec is applied at once."
	if v.Halted {
		return "The rollout of version " + templates + " of the " + g.kind + " templates is halted: " + v.culprit.String() +
			", which it reached, is not healthy (" + v.why + "). It goes on when " + v.culprit.String() +
			" is Ready or deleted; or roll stencil back to the previous templates." + meanwhile
	}
	return "Version " + templates + " of the " + g.kind + " templates changes this resource's objects and waits for its turn: stencil rolls template changes out to at most " +
		fmt.Sprint(g.Opts.Batch) + " " + g.kind + " resources at a time, and to the next one when one of those is Ready." + meanwhile
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

func init() {
	metrics.Registry.MustRegister(rolledOut, rolloutResources, rolloutHalted)
}

// startRolloutCounters makes the rollout's series of kind exist at zero,
// so that a dashboard's rate or increase has a start.
func startRolloutCounters(kind string) {
	rolledOut.WithLabelValues(kind)
	for _, state := range []string{"rolling", "waiting"} {
		rolloutResources.WithLabelValues(kind, state)
	}
	rolloutHalted.WithLabelValues(kind)
}
