package reconciler

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/reconciler/engine"
	"github.com/stencil-operator/stencil/reconciler/rollout"
	"github.com/stencil-operator/stencil/reconciler/shard"
	"github.com/stencil-operator/stencil/render"
)

// Options tune the controllers.
type Options struct {
	// MaxConcurrentReconciles per kind; 0 means 1.
	MaxConcurrentReconciles int
	// SkipNameValidation allows a second controller of the same name in one
	// process (tests that restart an operator in-process).
	SkipNameValidation bool
	// ReconcileTimeout is the deadline of each reconcile; 0 means
	// DefaultReconcileTimeout. The status write that ends a reconcile has a
	// deadline of its own, so a reconcile that ran out of time still says so.
	ReconcileTimeout time.Duration
	// Rollout paces changes that the templates alone bring to converged
	// resources; the zero value applies them at once.
	Rollout rollout.Options
	// MayWrite, when set, says whether this process may write now (the
	// leader fence: an error wrapping fence.ErrFenced when it may not). A
	// reconcile asks before it writes anything and, refused, leaves the
	// resource as it is and tries again soon.
	MayWrite func() error
	// Identities says which ServiceAccount of a resource's namespace
	// writes its objects; the zero value: stencil itself.
	Identities Identities
	// Namespaces are those of a namespace-scoped install (empty: every
	// namespace): the graph kinds' inputs are watched there. A namespace a
	// kind fixes for an input must be among them (the CLI refuses to start
	// otherwise).
	Namespaces []string
	// Shards, when set, makes this process one shard of several: it
	// claims each resource before it writes for it and gives the claim up
	// when the resource moves to another shard (see claim.go).
	Shards *shard.Shards
	// Live, when set, lets the caller replace a kind's templates while its
	// controller runs (see LiveKinds).
	Live *LiveKinds
}

// DefaultReconcileTimeout bounds a reconcile when Options leave it unset.
const DefaultReconcileTimeout = 2 * time.Minute

// newApplier is the applier of kind k's objects.
func newApplier(mgr ctrl.Manager, k *render.Kind, types engine.CachedTypes, firstApplies *engine.FirstApplies, served func(schema.GroupVersionKind) bool) (*engine.Applier, error) {
	opts := engine.Options{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Types: types, FirstApplies: firstApplies,
		OwnerKind: k.GroupVersionKind(), Namespaces: k.Declaration().Namespaces, Recorder: mgr.GetEventRecorder("stencil"), Served: served}
	for _, t := range k.Declaration().Owns {
		opts.Owns = append(opts.Owns, engine.OwnedType{GVK: t.GroupVersionKind(), ClusterScoped: t.ClusterScoped})
	}
	return engine.New(opts)
}

// Setup starts one controller per kind, named after the kind, all served by
// the same generic Reconciler. Each owned or observed type has one informer,
// shared by the kinds: whole objects when a status template reads them,
// metadata only otherwise, indexed by owner UID. A kind whose own type the
// cluster does not serve starts once it is (its cache is NewCache's); one
// that needs other types the cluster does not serve runs without them
// until they are (see served.go).
func Setup(mgr ctrl.Manager, kinds []*render.Kind, opts Options) error {
	types := cachedTypesOf(kinds, mgr.GetScheme())
	s := &setup{
		mgr:          mgr,
		opts:         opts,
		types:        types,
		served:       &servedTypes{mapper: mgr.GetRESTMapper(), index: indexOwnerUID(mgr, types), known: map[schema.GroupVersionKind]bool{}},
		firstApplies: &engine.FirstApplies{},
		memo:         &inputMemo{},
	}
	if opts.Shards != nil && opts.Shards.Leases != nil {
		s.leases = shard.NewLeaseWatch(*opts.Shards.Leases, mgr.GetAPIReader(), mgr.GetClient())
	}
	var err error
	if s.inputs, err = inputCache(mgr, kinds, opts.Namespaces); err != nil {
		return err
	}
	for _, k := range kinds {
		if s.served.has(context.Background(), k.GroupVersionKind()) {
			err = s.kind(k)
		} else {
			err = s.kindOnceServed(k)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// setup is what the kinds' controllers share: one per process.
type setup struct {
	mgr          ctrl.Manager
	opts         Options
	types        engine.CachedTypes
	served       *servedTypes
	firstApplies *engine.FirstApplies
	// leases: a shard's Lease is read once for all kinds.
	leases *shard.LeaseWatch
	inputs cache.Cache
	memo   *inputMemo
}

// kindOnceServed starts the controller of k once the cluster serves k's
// own type.
func (s *setup) kindOnceServed(k *render.Kind) error {
	gvk := k.GroupVersionKind()
	kindWaiting.WithLabelValues(gvk.Kind, apiVersionKind(gvk)).Set(1)
	s.mgr.GetLogger().Info("Not running a kind whose CRD the cluster does not serve; it starts once it is", "kind", gvk.Kind, "type", apiVersionKind(gvk))
	start := func() error {
		kindWaiting.DeleteLabelValues(gvk.Kind, apiVersionKind(gvk))
		return s.kind(k)
	}
	return s.mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { return awaitOwnType(ctx, s.served, gvk, start) }))
}

// kind sets up the controller of k, whose type the cluster serves.
func (s *setup) kind(k *render.Kind) error {
	gvk := k.GroupVersionKind()
	unhealthy.track(gvk.Kind)
	startCounters(gvk.Kind)
	needs := typesOf(context.Background(), k, s.served)
	r, err := s.reconciler(k, needs)
	if err != nil {
		return fmt.Errorf("%s: %w", gvk.Kind, err)
	}
	c, err := s.controller(r, k, needs)
	if err != nil {
		return fmt.Errorf("setting up the %s controller: %w", gvk.Kind, err)
	}
	return s.runnables(r, c, needs)
}

// reconciler is the Reconciler of k.
func (s *setup) reconciler(k *render.Kind, needs *kindTypes) (*Reconciler, error) {
	mgr, opts := s.mgr, s.opts
	applier, err := newApplier(mgr, k, s.types, s.firstApplies, needs.served)
	if err != nil {
		return nil, err
	}
	r := &Reconciler{
		client:     mgr.GetClient(),
		reader:     mgr.GetAPIReader(),
		recorder:   mgr.GetEventRecorder("stencil"),
		applier:    applier,
		rewrites:   newRewrites(),
		rollout:    rollout.New(k.GroupVersionKind().Kind, k.Templates(), opts.Rollout),
		mayWrite:   opts.MayWrite,
		shards:     opts.Shards,
		leases:     s.leases,
		scheme:     mgr.GetScheme(),
		recheck:    make(chan event.GenericEvent),
		inputCache: s.inputs,
		inputMemo:  s.memo,
		identities: opts.Identities,
		types:      needs,
		cache:      mgr.GetCache(),
	}
	r.current.Store(k)
	r.started = k
	opts.Live.add(r)
	if opts.Identities.Default != "" || len(opts.Identities.ByKind) > 0 {
		r.tenants = newTenants(mgr.GetConfig(), mgr.GetScheme())
	}
	r.rollout.NewObject = func() client.Object { return k.New() }
	r.rollout.List = listOf(mgr.GetClient(), mgr.GetScheme(), k.GroupVersionKind())
	return r, nil
}

// controller builds r's controller: its kind, the types it owns and
// observes and its inputs, of those the cluster serves (events.go maps
// their events to resources).
func (s *setup) controller(r *Reconciler, k *render.Kind, needs *kindTypes) (controller.Controller, error) {
	b := ctrl.NewControllerManagedBy(s.mgr).
		Named(strings.ToLower(k.GroupVersionKind().Kind)).
		For(k.New(), builder.WithPredicates(predicate.Funcs{CreateFunc: r.noteOrphaningOnCreate, UpdateFunc: r.notOwnStatusWrite, DeleteFunc: r.forgetOrphaning})).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: max(s.opts.MaxConcurrentReconciles, 1),
			SkipNameValidation:      &s.opts.SkipNameValidation,
			ReconciliationTimeout:   cmp.Or(s.opts.ReconcileTimeout, DefaultReconcileTimeout),
		})
	b = b.WatchesRawSource(source.Channel(r.rollout.Wake, &handler.EnqueueRequestForObject{}))
	b = b.WatchesRawSource(source.Channel(r.recheck, &handler.EnqueueRequestForObject{}))
	for _, t := range k.Declaration().Owns {
		if needs.served(t.GroupVersionKind()) {
			b = r.watchOwned(b, t.GroupVersionKind())
		}
	}
	for _, t := range k.Declaration().Observes {
		if needs.served(t.GroupVersionKind()) {
			b = b.Watches(s.types.NewObject(t.GroupVersionKind()), handler.EnqueueRequestsFromMapFunc(r.ownerByUID))
		}
	}
	for _, gvk := range inputTypes(k) {
		if needs.served(gvk) {
			b = b.WatchesRawSource(source.Kind[client.Object](s.inputs, metadataOf(gvk), r.inputHandler(gvk)))
		}
	}
	return b.Build(r)
}

// runnables adds what runs beside r's controller: the watch of the types
// it waits for, the recheck of unseen applies, and a shard's release of
// moved resources.
func (s *setup) runnables(r *Reconciler, c controller.Controller, needs *kindTypes) error {
	if len(needs.pending()) > 0 {
		s.mgr.GetLogger().Info("Running a kind without types the cluster does not serve; watching them once they are", "kind", r.kind().GroupVersionKind().Kind, "types", needs.names())
		if err := s.mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { return r.awaitTypes(ctx, c, s.served, s.inputs) })); err != nil {
			return err
		}
	}
	if err := s.mgr.Add(manager.RunnableFunc(r.recheckUnseen)); err != nil {
		return err
	}
	if s.opts.Shards != nil {
		return s.mgr.Add(manager.RunnableFunc(r.releaseMoved))
	}
	return nil
}

// inputTypes are the types of a kind's inputs.
func inputTypes(k *render.Kind) []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	for _, in := range k.Graph().Inputs() {
		if !slices.Contains(out, in.GroupVersionKind()) {
			out = append(out, in.GroupVersionKind())
		}
	}
	slices.SortFunc(out, func(a, b schema.GroupVersionKind) int { return strings.Compare(a.String(), b.String()) })
	return out
}

func metadataOf(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	return m
}

// listOf reads the custom resources of a kind from the cache.
func listOf(c client.Reader, scheme *runtime.Scheme, gvk schema.GroupVersionKind) func(context.Context) ([]v1alpha1.Object, error) {
	return func(ctx context.Context) ([]v1alpha1.Object, error) { return ListResources(ctx, c, scheme, gvk) }
}

// ListResources lists every custom resource of the kind gvk (a stencil
// kind: its items are v1alpha1.Objects) that c can read.
func ListResources(ctx context.Context, c client.Reader, scheme *runtime.Scheme, gvk schema.GroupVersionKind, opts ...client.ListOption) ([]v1alpha1.Object, error) {
	obj, err := scheme.New(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err != nil {
		return nil, err
	}
	list, ok := obj.(client.ObjectList)
	if !ok {
		return nil, fmt.Errorf("%s is not a list", gvk.Kind+"List")
	}
	if err := c.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	out := make([]v1alpha1.Object, 0, len(items))
	for _, item := range items {
		if cr, ok := item.(v1alpha1.Object); ok {
			out = append(out, cr)
		}
	}
	return out, nil
}

// indexOwnerUID indexes a type's informer by owner UID, when some kind
// owns or observes it.
func indexOwnerUID(mgr ctrl.Manager, types engine.CachedTypes) func(schema.GroupVersionKind) error {
	return func(gvk schema.GroupVersionKind) error {
		if !types.Declared(gvk) {
			return nil
		}
		one := engine.CachedTypes{Whole: map[schema.GroupVersionKind]bool{gvk: types.Whole[gvk]}, Scheme: types.Scheme}
		return engine.IndexOwnerUID(mgr.GetFieldIndexer(), one)
	}
}

// cachedTypesOf says how the cache holds the types kinds own or observe:
// whole when a kind's status template reads them, its health is judged by
// them or its graph or lookup reads them (trimmed to what stencil reads
// of them, but for a graph's, a lookup's or whole: true: trimmedGVKs);
// else metadata only.
func cachedTypesOf(kinds []*render.Kind, scheme *runtime.Scheme) engine.CachedTypes {
	t := engine.CachedTypes{Whole: map[schema.GroupVersionKind]bool{}, Scheme: scheme}
	for _, k := range kinds {
		for _, ref := range k.Declaration().Owns {
			// A graph kind's templates read its objects whole, and a
			// chart kind's lookup.
			t.Whole[ref.GroupVersionKind()] = t.Whole[ref.GroupVersionKind()] || ref.Status || ref.Whole || ref.JudgesHealth() || k.ReadsLive()
		}
		for _, ref := range k.Declaration().Observes {
			t.Whole[ref.GroupVersionKind()] = true
		}
	}
	t.Trimmed = trimmedGVKs(kinds)
	for _, gvks := range t.Trimmed {
		for gvk := range gvks {
			if scheme.Recognizes(gvk) {
				delete(gvks, gvk) // cached typed: kept whole (engine.Trim)
			}
		}
	}
	return t
}
