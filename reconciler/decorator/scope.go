package decorator

import (
	"context"
	"fmt"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/reconciler/engine"
	"github.com/stencil-operator/stencil/render"
)

// Decorators are opt-in. A decorator runs only when an install enables it
// (Options.Enabled), in a scope of its own; one that is neither enabled
// nor disabled is off: it watches nothing, caches nothing and writes
// nothing. What an earlier stencil set with it stays as it is, counted once
// when this process becomes leader and reported (a log line and
// stencil_decorator_leftover_objects); --disable-decorator removes it.
//
// An enabled decorator decorates the objects in its scope and gives up what
// it set on the others it holds fields on: an object that leaves the scope
// (relabelled, or its namespace relabelled), or that an earlier, wider
// scope reached. It writes nothing else outside its scope.

// Scope narrows the objects an enabled decorator decorates, beyond
// its own selector (_decorator.yaml): those Objects selects by their
// labels, in the namespaces Namespaces selects by theirs (a Namespace is in
// itself). A nil selector selects everything.
//
// The decorators' cache holds only the parents Objects selects (when the
// decorators of that type agree on one), so an object selector also saves
// memory and events. A namespace selector cannot narrow a cache (the set of
// namespaces it selects changes as they are relabelled): the parents of
// other namespaces stay cached, but their events, and those of the objects
// the decorator observes there, are dropped before they are queued.
type Scope struct {
	Objects    labels.Selector
	Namespaces labels.Selector
}

var namespaceGVK = corev1.SchemeGroupVersion.WithKind("Namespace")

// scope is a running decorator's Scope, as Setup
// resolved it.
type scope struct {
	Scope
	// namespaced: the parent type is namespaced. For a Namespace parent,
	// Namespaces selects by the parent's own labels.
	namespaced bool
	// cached selects the parents the decorators' cache holds; nil: all of
	// them. Those it leaves out are read from the API server only to give
	// up what the decorator set on them: when one leaves the cache, and in
	// one metadata list at start.
	cached labels.Selector
}

// contains reports whether parent is in the scope.
func (s *scope) contains(ctx context.Context, c cache.Cache, t engine.CachedTypes, parent metav1.Object) (bool, error) {
	if !s.selects(parent) {
		return false, nil
	}
	return s.inNamespace(ctx, c, t, parent.GetNamespace())
}

// selects: parent's own labels are in the scope (for a Namespace parent,
// those the namespace selector reads too).
func (s *scope) selects(parent metav1.Object) bool {
	set := labels.Set(parent.GetLabels())
	return (s.Objects == nil || s.Objects.Matches(set)) && (s.namespaced || s.Namespaces == nil || s.Namespaces.Matches(set))
}

// inNamespace: the namespace selector, if any, selects namespace ns (for a
// namespaced parent type). Its labels are read from the decorators' cache;
// a namespace not there (yet) is out of scope: its arrival reconciles its
// parents.
func (s *scope) inNamespace(ctx context.Context, c cache.Cache, t engine.CachedTypes, ns string) (bool, error) {
	if s.Namespaces == nil || !s.namespaced {
		return true, nil
	}
	obj := t.NewObject(namespaceGVK)
	if err := c.Get(ctx, client.ObjectKey{Name: ns}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("reading namespace %s: %w", ns, err)
	}
	return s.Namespaces.Matches(labels.Set(obj.GetLabels())), nil
}

// checkDecoratorNames: every decorator Options names is loaded, and none is
// both enabled and disabled.
func checkDecoratorNames(decorators []*render.Decorator, opts Options) error {
	known := func(name string) bool {
		return slices.ContainsFunc(decorators, func(d *render.Decorator) bool { return d.Name() == name })
	}
	var names []string
	for _, d := range decorators {
		names = append(names, d.Name())
	}
	for name := range opts.Enabled {
		if !known(name) {
			return fmt.Errorf("no decorator named %q to enable (decorators: %v)", name, names)
		}
	}
	for _, name := range opts.Disabled {
		if !known(name) {
			return fmt.Errorf("no decorator named %q to disable (decorators: %v)", name, names)
		}
		if _, on := opts.Enabled[name]; on {
			return fmt.Errorf("decorator %s is both enabled and disabled", name)
		}
	}
	return nil
}

// resolveScopes makes the scope of each running decorator (enabled or
// disabled) and decides which parents the cache holds: for each parent
// type, those of the object selector its decorators share; all of them
// when one has none, when they differ, when one is disabled (it gives up
// what it set everywhere), or, for Namespaces, when a namespace selector
// reads the labels of every Namespace.
func resolveScopes(mgr ctrl.Manager, running []*render.Decorator, opts Options) (map[string]*scope, error) {
	scopes := map[string]*scope{}
	byType := map[schema.GroupVersionKind][]*scope{}
	readsNamespaces := false
	for _, d := range running {
		gvk := d.Declaration().Decorates.GroupVersionKind()
		mapping, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return nil, fmt.Errorf("decorator %s: finding %s: %w", d.Name(), gvk, err)
		}
		s := &scope{namespaced: mapping.Scope.Name() == meta.RESTScopeNameNamespace}
		enabled, on := opts.Enabled[d.Name()]
		if on {
			s.Objects, s.Namespaces = orNil(enabled.Objects), orNil(enabled.Namespaces)
		}
		if s.Namespaces != nil && !s.namespaced && gvk != namespaceGVK {
			return nil, fmt.Errorf("decorator %s decorates %s, which is not namespaced: scope it with an object selector", d.Name(), gvk.Kind)
		}
		readsNamespaces = readsNamespaces || s.Namespaces != nil && s.namespaced
		scopes[d.Name()] = s
		if on {
			s.cached = s.Objects
			if gvk == namespaceGVK {
				s.cached = and(s.Objects, s.Namespaces)
			}
		}
		byType[gvk] = append(byType[gvk], s)
	}
	for gvk, ss := range byType {
		shared := ss[0].cached
		for _, s := range ss {
			if s.cached == nil || shared == nil || s.cached.String() != shared.String() || gvk == namespaceGVK && readsNamespaces {
				shared = nil
				break
			}
		}
		for _, s := range ss {
			s.cached = shared
		}
	}
	return scopes, nil
}

// orNil is sel, or nil when it selects everything.
func orNil(sel labels.Selector) labels.Selector {
	if sel == nil || sel.Empty() {
		return nil
	}
	return sel
}

// and selects what both a and b select (nil: everything).
func and(a, b labels.Selector) labels.Selector {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	reqs, _ := b.Requirements()
	return a.Add(reqs...)
}

// holdsFields: obj has fields of the field manager's (unreadable ones
// count: the reconcile says what is wrong).
func holdsFields(obj metav1.Object, manager string) bool {
	owned, err := ownedMetadata(obj.GetManagedFields(), manager)
	return err != nil || owned.held
}

// concerns: an event of parent obj is the decorator's business, when obj is
// decorated (in its selector and its scope) or holds fields of the
// decorator's (to give up). Other parents' events are dropped before they
// are queued.
func (r *decoratorReconciler) concerns(obj client.Object) bool {
	if holdsFields(obj, Manager(r.dec.Name())) {
		return true
	}
	if r.disabled || !r.dec.Decorates(obj) {
		return false
	}
	in, err := r.scope.contains(context.Background(), r.cache, r.types, obj)
	return err != nil || in // on an error, the reconcile decides
}

// leftScope reads the parent nn from the API server when the cache, which
// holds only the parents of r.scope.cached, does not hold it: a parent that
// still exists and that the cache left out is returned (metadata only),
// for the decorator to give up what it set on it. nil: it is gone, or the
// cache is about to hold it.
func (r *decoratorReconciler) leftScope(ctx context.Context, nn types.NamespacedName) (client.Object, error) {
	if r.scope.cached == nil {
		return nil, nil
	}
	gvk := r.dec.Declaration().Decorates.GroupVersionKind()
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(gvk)
	if err := r.reader.Get(ctx, nn, live); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading %s %s: %w", gvk.Kind, nn, err)
	}
	if r.scope.cached.Matches(labels.Set(live.GetLabels())) {
		return nil, nil
	}
	live.SetGroupVersionKind(gvk)
	return live, nil
}

// namespaceChanges queues the parents of a Namespace that enters or leaves
// the namespace selector sel: created with labels it selects, or
// relabelled in or out.
func (m *parentMapper) namespaceChanges(sel labels.Selector) handler.Funcs {
	matches := func(o client.Object) bool { return sel.Matches(labels.Set(o.GetLabels())) }
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if matches(e.Object) {
				m.queueIn(ctx, e.Object.GetName(), q)
			}
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if matches(e.ObjectOld) != matches(e.ObjectNew) {
				m.queueIn(ctx, e.ObjectNew.GetName(), q)
			}
		},
	}
}

// queueIn queues the cached parents in namespace ns.
func (m *parentMapper) queueIn(ctx context.Context, ns string, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	list := m.types.NewList(m.gvk)
	if err := m.cache.List(ctx, list, client.InNamespace(ns)); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the objects of a namespace that entered or left a decorator's scope", "decorator", m.dec.Name(), "namespace", ns)
		return
	}
	parents, err := engine.Items(list, m.gvk)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the objects of a namespace that entered or left a decorator's scope", "decorator", m.dec.Name(), "namespace", ns)
		return
	}
	for _, p := range parents {
		q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(p)})
	}
}

// leftoverPage is how many objects a leftover scan lists per request.
const leftoverPage = 500

// leftovers lists, from the API server, metadata only, page by page, the
// objects of type gvk that hold fields of decorator name's field manager
// and that keep does not keep.
func leftovers(ctx context.Context, reader client.Reader, gvk schema.GroupVersionKind, name string, keep func(metav1.Object) bool) ([]types.NamespacedName, error) {
	var out []types.NamespacedName
	next := ""
	for {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := reader.List(ctx, list, client.Limit(leftoverPage), client.Continue(next)); err != nil {
			return out, fmt.Errorf("listing %s: %w", gvk.Kind, err)
		}
		for i := range list.Items {
			item := &list.Items[i]
			if !keep(item) && holdsFields(item, Manager(name)) {
				out = append(out, client.ObjectKeyFromObject(item))
			}
		}
		if next = list.GetContinue(); next == "" {
			return out, nil
		}
	}
}

// releaseOutOfCache is a source that, once its controller starts, queues
// the parents outside the cache's selector on which the decorator holds
// fields (an earlier, wider scope's): their reconcile gives them up.
func (r *decoratorReconciler) releaseOutOfCache() source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		go func() {
			gvk := r.dec.Declaration().Decorates.GroupVersionKind()
			keep := func(o metav1.Object) bool { return r.scope.cached.Matches(labels.Set(o.GetLabels())) }
			found, err := leftovers(ctx, r.reader, gvk, r.dec.Name(), keep)
			if err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "Looking for objects outside a decorator's scope that hold what it set", "decorator", r.dec.Name())
			}
			if len(found) > 0 {
				ctrl.LoggerFrom(ctx).Info("Giving up what a decorator set on objects outside its scope", "decorator", r.dec.Name(), "objects", len(found), "first", klog.KRef(found[0].Namespace, found[0].Name))
			}
			for _, nn := range found {
				q.Add(reconcile.Request{NamespacedName: nn})
			}
		}()
		return nil
	})
}

// reportLeftovers counts, once this process leads, what the decorators that
// are off set in the cluster (under an earlier stencil that ran them): the
// objects of their parent types that hold fields of theirs, and their
// children. It writes nothing: it says so in the log and in
// stencil_decorator_leftover_objects.
func reportLeftovers(reader client.Reader, off []*render.Decorator) manager.Runnable {
	return manager.RunnableFunc(func(ctx context.Context) error {
		log := ctrl.LoggerFrom(ctx)
		for _, d := range off {
			gvk := d.Declaration().Decorates.GroupVersionKind()
			found, err := leftovers(ctx, reader, gvk, d.Name(), func(metav1.Object) bool { return false })
			if err != nil {
				log.Error(err, "Looking for objects that hold what a decorator that is off set", "decorator", d.Name())
				continue
			}
			children, err := countChildren(ctx, reader, d)
			if err != nil {
				log.Error(err, "Looking for the objects a decorator that is off created", "decorator", d.Name())
				continue
			}
			leftoverObjects.WithLabelValues(d.Name()).Set(float64(len(found) + children))
			if len(found)+children == 0 {
				continue
			}
			keys := []any{"decorator", d.Name(), "objects", len(found), "children", children}
			if len(found) > 0 {
				keys = append(keys, "first", klog.KRef(found[0].Namespace, found[0].Name))
			}
			log.Info("A decorator is off, and objects still hold what it set: left as they are. Enable it with --decorators to keep them up to date, or run once with --disable-decorator to remove them", keys...)
		}
		return nil
	})
}

// countChildren counts decorator d's children, by its label.
func countChildren(ctx context.Context, reader client.Reader, d *render.Decorator) (int, error) {
	n := 0
	for _, t := range d.Declaration().Owns {
		next := ""
		for {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(t.GroupVersionKind().GroupVersion().WithKind(t.Kind + "List"))
			if err := reader.List(ctx, list, client.MatchingLabels{v1alpha1.LabelDecorator: d.Name()}, client.Limit(leftoverPage), client.Continue(next)); err != nil {
				return n, fmt.Errorf("listing %s: %w", t.Kind, err)
			}
			n += len(list.Items)
			if next = list.GetContinue(); next == "" {
				break
			}
		}
	}
	return n, nil
}

// leftoverObjects is what reportLeftovers found.
var leftoverObjects = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "stencil_decorator_leftover_objects",
	Help: "Objects that hold labels or annotations a decorator set, and its children, while it is off (not in --decorators), counted when this process became leader; 0 for the decorators that run. --disable-decorator=<kind> removes them.",
}, []string{"kind"})

func init() {
	metrics.Registry.MustRegister(leftoverObjects)
}
