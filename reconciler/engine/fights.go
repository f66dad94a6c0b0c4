package engine

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// A fight: another writer keeps taking back a field that stencil keeps
// reverting (an autoscaler and a template that both set replicas). After
// fightThreshold corrections of one object, each within fightWindow of the
// last, stencil waits before each further correction, longer each time
// (client-go's per-item exponential rate limiter, fightBase doubling up to
// fightMax), and meanwhile leaves the object as the other writer left it
// and shows the last drift it reverted. A correction that holds for
// fightWindow ends the fight.
const (
	fightThreshold = 3
	fightWindow    = time.Minute
	fightBase      = time.Second
	fightMax       = 5 * time.Minute
)

// Fights keeps the fights over each object, by ObjectKey, and paces the
// corrections made during them.
type Fights struct {
	mu      sync.Mutex
	byKey   map[ObjectKey]*fight
	limiter workqueue.TypedRateLimiter[ObjectKey]
	swept   time.Time
}

type fight struct {
	// corrections in a row, each within fightWindow of the one before.
	corrections int
	last        time.Time
	// next: no correction before it.
	next time.Time
	// drift is the drift that started the fight: what the object shows
	// while it lasts.
	drift v1alpha1.ObjectDrift
}

// over reports whether g has ended: its last correction, or the wait
// after it, is more than fightWindow ago.
func (g *fight) over(now time.Time) bool {
	return now.Sub(later(g.last, g.next)) > fightWindow
}

// end is when g ends if nothing changes.
func (g *fight) end() time.Time {
	return later(g.last, g.next).Add(fightWindow)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// NewFights is a Fights that knows of no fight yet.
func NewFights() *Fights {
	return &Fights{byKey: map[ObjectKey]*fight{}, limiter: workqueue.NewTypedItemExponentialFailureRateLimiter[ObjectKey](fightBase, fightMax)}
}

// Fighting reports whether key is in a fight, and its state.
func (f *Fights) Fighting(key ObjectKey, now time.Time) (DeferredCorrection, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.byKey[key]
	if g == nil || g.corrections < fightThreshold || g.over(now) {
		return DeferredCorrection{}, false
	}
	return g.state(), true
}

// Corrected records a correction of key, and returns the fight's state and
// whether this correction started it. The drift a fight shows stays the
// one that started it: status does not change (and cost a write) with
// every correction.
func (f *Fights) Corrected(key ObjectKey, drift v1alpha1.ObjectDrift, now time.Time) (DeferredCorrection, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sweep(now)
	g := f.byKey[key]
	if g == nil || g.over(now) {
		g = &fight{}
		f.byKey[key] = g
		f.limiter.Forget(key)
	}
	g.corrections++
	g.last = now
	if g.corrections == fightThreshold {
		g.drift = drift
		g.drift.Reverted = false // while it waits, the field is left as the other writer set it
	}
	if g.corrections >= fightThreshold {
		g.next = now.Add(f.limiter.When(key))
	}
	return g.state(), g.corrections == fightThreshold
}

// sweep drops the entries of fights that are over, at most once per
// fightWindow: an object corrected once and never reconciled again would
// otherwise stay. f.mu must be held.
func (f *Fights) sweep(now time.Time) {
	if now.Sub(f.swept) < fightWindow {
		return
	}
	f.swept = now
	for key, g := range f.byKey {
		if g.over(now) {
			delete(f.byKey, key)
			f.limiter.Forget(key)
		}
	}
}

func (g *fight) state() DeferredCorrection {
	return DeferredCorrection{Drift: g.drift, Until: g.next, end: g.end()}
}

// calm records that key needs no correction now. It reports the fight's
// state while the fight lasts (the last correction holds, but may not for
// long: the status keeps showing the fight, and the resource looks again
// when it would end), and forgets the fight once it is over.
func (f *Fights) calm(key ObjectKey, now time.Time) (DeferredCorrection, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.byKey[key]
	switch {
	case g == nil:
		return DeferredCorrection{}, false
	case g.over(now):
		delete(f.byKey, key)
		f.limiter.Forget(key)
		return DeferredCorrection{}, false
	case g.corrections < fightThreshold:
		return DeferredCorrection{}, false
	}
	state := g.state()
	state.Until = state.end // no correction is due: look again when it would end
	return state, true
}

// forget drops key (a deleted or pruned object).
func (f *Fights) forget(key ObjectKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.byKey, key)
	f.limiter.Forget(key)
}

// DeferredCorrection is the state of a fight: the drift it shows, and when
// the next correction may go.
type DeferredCorrection struct {
	Drift v1alpha1.ObjectDrift
	// Until: the resource looks again then (the next correction may go,
	// or the fight would end).
	Until time.Time
	end   time.Time
}

// Describe says who fights over what, and what to do. It says nothing that
// changes while the fight lasts.
func (d DeferredCorrection) Describe() string {
	var fields, managers []string
	for _, f := range d.Drift.Fields {
		fields = append(fields, f.Path)
		if f.Manager != "" && !slices.Contains(managers, f.Manager) {
			managers = append(managers, f.Manager)
		}
	}
	who := "another writer"
	if len(managers) > 0 {
		who = strings.Join(managers, ", ")
	}
	return "stencil and " + who + " keep changing " + strings.Join(fields, ", ") + " of " + d.Drift.Kind + " " + quoted(d.Drift.Namespace, d.Drift.Name) +
		": stencil reverted it " + strconv.Itoa(fightThreshold) + " times in a row, and now waits before each correction, from " + fightBase.String() +
		" doubling up to " + fightMax.String() + ". Hand the field over in the template (stencil.dev/hand-over), or stop the other writer"
}
