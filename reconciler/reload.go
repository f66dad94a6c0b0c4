package reconciler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/stencil-operator/stencil/reconciler/engine"
	"github.com/stencil-operator/stencil/render"
)

// kind is the kind's templates. A reconcile sees one version of them
// from start to end: it holds r.swap's read lock, and Replace swaps under
// the write lock. Event handlers, outside any reconcile, read only what no
// reload changes (the kind's type), or a flag that is as right either way.
func (r *Reconciler) kind() *render.Kind { return r.current.Load() }

// LiveKinds are the kinds whose templates may be replaced while their
// controllers run (stencil --reload-templates): Setup registers each kind's
// reconciler when Options.Live is set. The zero value is ready to use.
type LiveKinds struct {
	mu     sync.Mutex
	byKind map[schema.GroupKind]*Reconciler
}

// add registers r; a nil LiveKinds registers nothing.
func (l *LiveKinds) add(r *Reconciler) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byKind == nil {
		l.byKind = map[schema.GroupKind]*Reconciler{}
	}
	l.byKind[r.kind().GroupVersionKind().GroupKind()] = r
}

// Kind is the kind of a group and kind as its controller renders it now,
// nil when none runs it.
func (l *LiveKinds) Kind(gk schema.GroupKind) *render.Kind {
	l.mu.Lock()
	r := l.byKind[gk]
	l.mu.Unlock()
	if r == nil {
		return nil
	}
	return r.kind()
}

// Replaced is what Replace did.
type Replaced struct {
	// Unchanged: the templates were those the controller had; nothing
	// was done.
	Unchanged bool
	// Templates is the digest of the templates now in use.
	Templates string
	// Resources is how many resources of the kind were queued to be
	// reconciled again.
	Resources int
}

// ErrNotRunning says that no controller runs the kind (its CRD is not
// served yet); there is nothing to reload.
var ErrNotRunning = errors.New("no controller runs the kind")

// ErrNeedsRestart wraps the refusal of templates that need watches or a
// cache the running controllers do not have.
var ErrNeedsRestart = errors.New("restart stencil to pick this change up")

// Replace makes the controller of k's kind render with k from its next
// reconcile on (a reconcile under way finishes with the templates it
// began with), and queues every resource of the kind to be reconciled
// again. The rollout gate takes k as a new version of the templates: with
// --rollout-batch above 0 the change is paced like a new stencil version.
// It refuses templates that own, observe or read types the running
// controllers do not watch, or need whole objects the cache holds as
// metadata only, that change whether an owned type is optional, or that
// drop a type the kind waits for: those need a restart (an error wrapping
// ErrNeedsRestart), and the controller keeps the templates it has. Which
// types are served, rendered and pruned was worked out when the
// controller was set up, from its declaration; refusing is what keeps a
// reload from changing it halfway (rebuilding it would race with
// awaitTypes and the watches already added).
func (l *LiveKinds) Replace(ctx context.Context, k *render.Kind) (Replaced, error) {
	l.mu.Lock()
	r := l.byKind[k.GroupVersionKind().GroupKind()]
	l.mu.Unlock()
	if r == nil {
		return Replaced{}, fmt.Errorf("%s: %w", k.GroupVersionKind().Kind, ErrNotRunning)
	}
	old := r.kind()
	if old.Templates() == k.Templates() {
		return Replaced{Unchanged: true, Templates: k.Templates()}, nil
	}
	// Against the kind as set up, whose watches run, not the last reload:
	// a type dropped by one reload and needed again by the next is still
	// watched.
	if err := unwatched(r.started, k, r.applier.Types()); err != nil {
		return Replaced{}, fmt.Errorf("%w: %w", err, ErrNeedsRestart)
	}
	if err := stillWaits(r.types, k); err != nil {
		return Replaced{}, fmt.Errorf("%w: %w", err, ErrNeedsRestart)
	}
	if !slices.Equal(old.Conversion().Versions(), k.Conversion().Versions()) {
		return Replaced{}, fmt.Errorf("the kind's versions change from %v to %v (its CRD's conversion webhook is set up at start): %w", old.Conversion().Versions(), k.Conversion().Versions(), ErrNeedsRestart)
	}
	r.swap.Lock()
	r.current.Store(k)
	r.rollout.NewVersion(k.Templates())
	r.swap.Unlock()
	n, err := r.enqueueAll(ctx)
	return Replaced{Templates: k.Templates(), Resources: n}, err
}

// enqueueAll queues every resource of the kind, as the cache holds them,
// to be reconciled again.
func (r *Reconciler) enqueueAll(ctx context.Context) (int, error) {
	crs, err := ListResources(ctx, r.client, r.scheme, r.kind().GroupVersionKind())
	if err != nil {
		return 0, fmt.Errorf("listing the %s resources to reconcile again: %w", r.kind().GroupVersionKind().Kind, err)
	}
	for _, cr := range crs {
		select {
		case r.recheck <- event.GenericEvent{Object: cr}:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return len(crs), nil
}

// unwatched says what next needs that the controllers set up for cur (and
// the cache, which holds types) lack: an owned type that is not watched,
// or whose scope changed; an observed or input type that is not watched;
// an owned type next's templates read whole that the cache holds as
// metadata only, or trimmed. A type next no longer needs is fine: it is still watched,
// and its objects are pruned.
func unwatched(cur, next *render.Kind, types engine.CachedTypes) error {
	var missing []string
	owned := map[schema.GroupVersionKind]render.TypeRef{}
	for _, t := range cur.Declaration().Owns {
		owned[t.GroupVersionKind()] = t
	}
	for _, t := range next.Declaration().Owns {
		gvk := t.GroupVersionKind()
		was, ok := owned[gvk]
		switch {
		case !ok:
			missing = append(missing, "it owns "+gvk.Kind+", which it did not")
		case was.ClusterScoped != t.ClusterScoped:
			missing = append(missing, "the scope of "+gvk.Kind+" changed")
		case was.Optional != t.Optional:
			// Which types are served, rendered and pruned was worked out
			// at start-up from whether each is optional: a type made
			// optional would render as not served while prune, which
			// knows it served, deleted its objects.
			missing = append(missing, "whether "+gvk.Kind+" is optional changed")
		case (t.Status || t.Whole || t.JudgesHealth() || next.ReadsLive()) && !types.Whole[gvk]:
			missing = append(missing, "it reads "+gvk.Kind+" whole, which the cache holds as metadata only")
		case types.Trimmed.Trims(next.GroupVersionKind().GroupKind(), gvk) && (t.Whole || next.ReadsLive()):
			// What the cache trims (trimmedTypes) was decided at start-up.
			missing = append(missing, "it reads "+gvk.Kind+" whole, which the cache may hold trimmed")
		}
	}
	for _, t := range next.Declaration().Observes {
		if !slices.ContainsFunc(cur.Declaration().Observes, func(o render.TypeRef) bool { return o.GroupVersionKind() == t.GroupVersionKind() }) {
			missing = append(missing, "it observes "+t.Kind+", which it did not")
		}
	}
	for _, gvk := range inputTypes(next) {
		if !slices.Contains(inputTypes(cur), gvk) {
			missing = append(missing, "it reads inputs of type "+gvk.Kind+", which it did not")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the %s templates need watches the running controller lacks: %s", next.GroupVersionKind().Kind, strings.Join(missing, "; "))
	}
	return nil
}

// stillWaits refuses templates that no longer need a type the kind waits
// for (a required type the cluster does not serve): the running
// controller would go on saying the kind needs it.
func stillWaits(types *kindTypes, next *render.Kind) error {
	needed := map[schema.GroupVersionKind]bool{}
	for _, t := range next.Declaration().Owns {
		needed[t.GroupVersionKind()] = true
	}
	for _, t := range next.Declaration().Observes {
		needed[t.GroupVersionKind()] = true
	}
	for _, gvk := range inputTypes(next) {
		needed[gvk] = true
	}
	var dropped []string
	for _, gvk := range types.waitsFor() {
		if !needed[gvk] {
			dropped = append(dropped, apiVersionKind(gvk))
		}
	}
	if len(dropped) > 0 {
		slices.Sort(dropped)
		return fmt.Errorf("the %s templates no longer need %s, which the running controller waits for", next.GroupVersionKind().Kind, strings.Join(dropped, ", "))
	}
	return nil
}
