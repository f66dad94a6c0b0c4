package decorator

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/reconciler/engine"
	"github.com/stencil-operator/stencil/reconciler/syncmap"
	"github.com/stencil-operator/stencil/render"
)

// Options tune the decorators' controllers.
type Options struct {
	// MaxConcurrentReconciles per decorator; 0 means 1.
	MaxConcurrentReconciles int
	// SkipNameValidation allows a second controller of the same name in one
	// process (tests that restart an operator in-process).
	SkipNameValidation bool
	// ReconcileTimeout is the deadline of each reconcile; 0 means
	// defaultReconcileTimeout.
	ReconcileTimeout time.Duration
	// MayWrite, when set, says whether this process may write now (the
	// leader fence: an error wrapping fence.ErrFenced when it may not).
	MayWrite func() error
	// Enabled are the decorators (by name) that run, each in its scope.
	// The others are off, unless disabled: they watch and write nothing
	// (see Setup).
	Enabled map[string]Scope
	// Disabled are decorators (by name) that give up everything they set:
	// their labels and annotations on every parent, and their children.
	// The way to remove a decorator: run with it disabled, then delete its
	// folder.
	Disabled []string
}

// defaultReconcileTimeout is a decorator reconcile's deadline, as a kind's.
const defaultReconcileTimeout = 2 * time.Minute

// Setup starts one controller per running decorator, named
// "decorator-<name>": those opts enables (Options.Enabled), in their
// scope, and those it disables (they give up what they set). The others
// are off: no controller, no cache; objects that hold what they set are
// counted once this process leads, and reported (see scope.go).
// The running decorators share a cache of their own, apart from the
// manager's (which holds only stencil-labelled objects): the objects of the
// parent types (whole: their managedFields say which labels stencil holds),
// only those of a scope's object selector when it has one; every object of
// the observed types, metadata only, without managedFields; Namespaces'
// labels, metadata only, for a namespace selector; and of the owned types
// only the decorators' children.
func Setup(mgr ctrl.Manager, decorators []*render.Decorator, opts Options) error {
	if err := checkDecoratorNames(decorators, opts); err != nil {
		return err
	}
	var running, off []*render.Decorator
	for _, d := range decorators {
		// Served from the start, as the alerts on them expect.
		decoratorFailures.WithLabelValues(d.Name(), "RenderFailed")
		if _, on := opts.Enabled[d.Name()]; on || slices.Contains(opts.Disabled, d.Name()) {
			leftoverObjects.WithLabelValues(d.Name()).Set(0)
			running = append(running, d)
		} else {
			leftoverObjects.WithLabelValues(d.Name())
			off = append(off, d)
		}
	}
	if len(off) > 0 {
		if err := mgr.Add(reportLeftovers(mgr.GetAPIReader(), off)); err != nil {
			return fmt.Errorf("adding the decorators' leftover report: %w", err)
		}
	}
	if len(running) == 0 {
		return nil
	}
	types := engine.CachedTypes{Whole: map[schema.GroupVersionKind]bool{}, Scheme: mgr.GetScheme()}
	scopes, err := resolveScopes(mgr, running, opts)
	if err != nil {
		return err
	}
	c, err := newDecoratorCache(mgr, running, types, scopes)
	if err != nil {
		return err
	}
	for _, d := range running {
		engine.StartObjectCounters(d.Name())
		decorated.track(d.Name())
		if err := setupDecorator(mgr, c, d, types, scopes[d.Name()], opts); err != nil {
			return err
		}
	}
	return nil
}

// newDecoratorCache makes the decorators' cache and adds it to the manager.
func newDecoratorCache(mgr ctrl.Manager, decorators []*render.Decorator, types engine.CachedTypes, scopes map[string]*scope) (cache.Cache, error) {
	children, err := labels.NewRequirement(v1alpha1.LabelDecorator, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	owned := map[schema.GroupVersionKind]bool{}
	byObject := map[client.Object]cache.ByObject{}
	for _, d := range decorators {
		types.Whole[d.Declaration().Decorates.GroupVersionKind()] = true
		for _, t := range d.Declaration().Owns {
			if owned[t.GroupVersionKind()] {
				continue
			}
			owned[t.GroupVersionKind()] = true
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(t.GroupVersionKind())
			byObject[u] = cache.ByObject{Label: labels.NewSelector().Add(*children)}
		}
	}
	for _, d := range decorators {
		gvk := d.Declaration().Decorates.GroupVersionKind()
		if sel := scopes[d.Name()].cached; sel != nil {
			byObject[types.NewObject(gvk)] = cache.ByObject{Label: sel} // the same for every decorator of the type
		}
		for _, o := range d.Declaration().Observes {
			if owned[o.GroupVersionKind()] || types.Whole[o.GroupVersionKind()] {
				return nil, fmt.Errorf("decorator %s observes %s, which a decorator also owns or decorates: one cache cannot hold it both ways", d.Name(), o.Kind)
			}
		}
	}
	for gvk := range owned {
		if types.Whole[gvk] {
			return nil, fmt.Errorf("decorators: %s is both a parent and a child type, which one cache cannot hold both ways", gvk.Kind)
		}
	}
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient:       mgr.GetHTTPClient(),
		Scheme:           mgr.GetScheme(),
		Mapper:           mgr.GetRESTMapper(),
		ByObject:         byObject,
		DefaultTransform: cacheTransform,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the decorators' cache: %w", err)
	}
	if err := mgr.Add(c); err != nil {
		return nil, fmt.Errorf("adding the decorators' cache: %w", err)
	}
	return c, nil
}

// cacheTransform drops the managedFields of metadata-only objects (the
// observed types: only their labels and ownerReferences are read), not of
// the parents, whose managedFields say what stencil holds; and it gives
// every object's labels and annotations shared strings
// (engine.InternMetadata): a ReplicaSet's pods carry the labels of its pod
// template.
func cacheTransform(obj any) (any, error) {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		m.SetManagedFields(nil)
	}
	return engine.InternMetadata(obj), nil
}

func setupDecorator(mgr ctrl.Manager, c cache.Cache, d *render.Decorator, types engine.CachedTypes, sc *scope, opts Options) error {
	decl := d.Declaration()
	parentGVK := decl.Decorates.GroupVersionKind()
	r := &decoratorReconciler{
		dec:      d,
		cache:    c,
		client:   mgr.GetClient(),
		reader:   mgr.GetAPIReader(),
		recorder: mgr.GetEventRecorder("stencil"),
		types:    types,
		scope:    sc,
		mayWrite: opts.MayWrite,
		disabled: slices.Contains(opts.Disabled, d.Name()),
	}
	m := &parentMapper{dec: d, cache: c, types: types, gvk: parentGVK, scope: sc}
	r.forgetParent = m.forget
	b := ctrl.NewControllerManagedBy(mgr).
		Named("decorator-" + d.Name()).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: max(opts.MaxConcurrentReconciles, 1),
			SkipNameValidation:      &opts.SkipNameValidation,
			ReconciliationTimeout:   cmp.Or(opts.ReconcileTimeout, defaultReconcileTimeout),
		}).
		WatchesRawSource(source.Kind(c, types.NewObject(parentGVK), &handler.EnqueueRequestForObject{}, predicate.NewPredicateFuncs(r.concerns), predicate.Funcs{UpdateFunc: parentChanged}))
	if sc.Namespaces != nil && sc.namespaced && !r.disabled {
		b = b.WatchesRawSource(source.Kind(c, types.NewObject(namespaceGVK), m.namespaceChanges(sc.Namespaces)))
	}
	if sc.cached != nil && !r.disabled {
		b = b.WatchesRawSource(r.releaseOutOfCache())
	}
	for _, o := range decl.Observes {
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(o.GroupVersionKind())
		b = b.WatchesRawSource(source.Kind[client.Object](c, obj, handler.EnqueueRequestsFromMapFunc(m.observers(o)), predicate.Funcs{UpdateFunc: relationChanged}))
	}
	for _, t := range decl.Owns {
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(t.GroupVersionKind())
		b = b.WatchesRawSource(source.Kind[client.Object](c, obj, handler.EnqueueRequestsFromMapFunc(m.childOwner)))
	}
	if err := b.Complete(r); err != nil {
		return fmt.Errorf("setting up decorator %s: %w", d.Name(), err)
	}
	return nil
}

// parentChanged: an update that can change what the decorator renders or
// whether it decorates: labels, annotations, spec (generation) or deletion.
// The parent's status (a ReplicaSet's replica counts) changes nothing.
func parentChanged(e event.UpdateEvent) bool {
	o, n := e.ObjectOld, e.ObjectNew
	return o.GetGeneration() != n.GetGeneration() ||
		!maps.Equal(o.GetLabels(), n.GetLabels()) ||
		!maps.Equal(o.GetAnnotations(), n.GetAnnotations()) ||
		(o.GetDeletionTimestamp() == nil) != (n.GetDeletionTimestamp() == nil)
}

// relationChanged: an update of an observed object that can change which
// parents observe it: its labels or its ownerReferences.
func relationChanged(e event.UpdateEvent) bool {
	o, n := e.ObjectOld, e.ObjectNew
	if !maps.Equal(o.GetLabels(), n.GetLabels()) || len(o.GetOwnerReferences()) != len(n.GetOwnerReferences()) {
		return true
	}
	for i, ref := range o.GetOwnerReferences() {
		if n.GetOwnerReferences()[i].UID != ref.UID {
			return true
		}
	}
	return false
}

// parentMapper finds the parents an observed object or a child belongs to.
type parentMapper struct {
	dec       *render.Decorator
	cache     cache.Cache
	types     engine.CachedTypes
	gvk       schema.GroupVersionKind
	scope     *scope
	selectors syncmap.Map[selectorKey, parentSelector]
}

// selectorKey: a parent and the name of one of its observed lists.
type selectorKey struct {
	parent types.NamespacedName
	as     string
}

// forget drops what the mapper remembers of a parent that is gone.
func (m *parentMapper) forget(nn types.NamespacedName) {
	for _, o := range m.dec.Declaration().Observes {
		m.selectors.Delete(selectorKey{parent: nn, as: o.As})
	}
}

// parentSelector is a parent's selector of observed objects, for the
// parent's resourceVersion it was read from.
type parentSelector struct {
	resourceVersion string
	selector        labels.Selector
}

// observers maps an object of the observed type o to the parents that
// observe it.
func (m *parentMapper) observers(o render.Observed) handler.MapFunc {
	if o.OwnedByParent {
		return func(_ context.Context, obj client.Object) []reconcile.Request {
			return m.byOwnerReference(obj)
		}
	}
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		// Out of the scope's namespaces, an observed object's event ends here.
		in, err := m.scope.inNamespace(ctx, m.cache, m.types, obj.GetNamespace())
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Finding the parents of an observed object", "decorator", m.dec.Name())
		}
		if !in {
			return nil
		}
		parents, err := m.candidates(ctx, obj)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Finding the parents of an observed object", "decorator", m.dec.Name())
			return nil
		}
		var out []reconcile.Request
		for _, p := range parents {
			if !m.dec.Decorates(p) || !m.scope.selects(p) {
				continue
			}
			if sel := m.selector(o, p); sel != nil && sel.Matches(labels.Set(obj.GetLabels())) {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(p)})
			}
		}
		return out
	}
}

// candidates are the parents that may observe obj: those in its namespace,
// or, for Namespace parents, its namespace itself.
func (m *parentMapper) candidates(ctx context.Context, obj client.Object) ([]client.Object, error) {
	if m.gvk == namespaceGVK {
		ns := m.types.NewObject(m.gvk)
		err := m.cache.Get(ctx, client.ObjectKey{Name: obj.GetNamespace()}, ns)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return []client.Object{ns}, err
	}
	list := m.types.NewList(m.gvk)
	if err := m.cache.List(ctx, list, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil, err
	}
	return engine.Items(list, m.gvk)
}

// selector is parent p's selector of the objects o observes, remembered
// per resourceVersion: a pod event does not convert every ReplicaSet.
func (m *parentMapper) selector(o render.Observed, p client.Object) labels.Selector {
	key := selectorKey{parent: client.ObjectKeyFromObject(p), as: o.As}
	if v, ok := m.selectors.Load(key); ok && v.resourceVersion == p.GetResourceVersion() {
		return v.selector
	}
	u, err := parentMap(p, m.gvk)
	if err != nil {
		return nil
	}
	sel, err := render.ObservedSelector(o, u)
	if err != nil {
		return nil
	}
	m.selectors.Store(key, parentSelector{resourceVersion: p.GetResourceVersion(), selector: sel})
	return sel
}

// childOwner maps a child of this decorator to its parent, by its
// ownerReference.
func (m *parentMapper) childOwner(_ context.Context, obj client.Object) []reconcile.Request {
	if obj.GetLabels()[v1alpha1.LabelDecorator] != m.dec.Name() {
		return nil
	}
	return m.byOwnerReference(obj)
}

// byOwnerReference: the parents obj has an ownerReference to.
func (m *parentMapper) byOwnerReference(obj client.Object) []reconcile.Request {
	var out []reconcile.Request
	for _, ref := range obj.GetOwnerReferences() {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil || gv.Group != m.gvk.Group || ref.Kind != m.gvk.Kind {
			continue
		}
		nn := types.NamespacedName{Name: ref.Name}
		if m.scope.namespaced {
			nn.Namespace = obj.GetNamespace()
		}
		out = append(out, reconcile.Request{NamespacedName: nn})
	}
	return out
}

// The decorators' metrics, beside the counters they share with the kinds
// (applied, pruned, reverted; labelled with the decorator's name).
var (
	decoratorFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stencil_decorator_failures_total",
		Help: "Failures of a decorator on a parent, by reason (RenderFailed, ApplyFailed, PruneFailed, ReleaseFailed; KeyConflict counted when the keys in conflict change); each also is a Warning event on the parent.",
	}, []string{"kind", "reason"})
	decorated = newDecoratedParents()
)

func init() {
	metrics.Registry.MustRegister(decoratorFailures, decorated)
}

// decoratedParents counts, per decorator, the parents it decorated
// successfully on their last reconcile.
type decoratedParents struct {
	gauge *prometheus.GaugeVec
	mu    sync.Mutex
	by    map[string]map[types.NamespacedName]bool
}

func newDecoratedParents() *decoratedParents {
	return &decoratedParents{
		gauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stencil_decorated_objects",
			Help: "Objects a decorator decorates, as of their last reconcile.",
		}, []string{"kind"}),
		by: map[string]map[types.NamespacedName]bool{},
	}
}

func (d *decoratedParents) Describe(ch chan<- *prometheus.Desc) { d.gauge.Describe(ch) }
func (d *decoratedParents) Collect(ch chan<- prometheus.Metric) { d.gauge.Collect(ch) }

func (d *decoratedParents) track(name string) { d.update(name, types.NamespacedName{}, false, false) }
func (d *decoratedParents) set(name string, nn types.NamespacedName) {
	d.update(name, nn, true, true)
}
func (d *decoratedParents) forget(name string, nn types.NamespacedName) {
	d.update(name, nn, false, true)
}

func (d *decoratedParents) update(name string, nn types.NamespacedName, on, change bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.by[name] == nil {
		d.by[name] = map[types.NamespacedName]bool{}
	}
	switch {
	case change && on:
		d.by[name][nn] = true
	case change:
		delete(d.by[name], nn)
	}
	d.gauge.WithLabelValues(name).Set(float64(len(d.by[name])))
}
