package reconciler

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
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

// CacheOptions makes the manager's cache hold only what stencil needs: every
// custom resource of the kinds, and of all other types only the objects
// labelled as stencil's. Custom resources are held without their
// managedFields, which nothing reads (finalizers and status go in merge
// patches); owned objects keep theirs for the drift check.
func CacheOptions(kinds []*render.Kind) cache.Options {
	return ShardCacheOptions(kinds, labels.Everything())
}

// ShardCacheOptions is CacheOptions for one shard: the custom resources
// that shard selects (see Shards).
func ShardCacheOptions(kinds []*render.Kind, shard labels.Selector) cache.Options {
	byObject := map[client.Object]cache.ByObject{}
	for _, k := range kinds {
		byObject[k.New()] = cache.ByObject{Label: shard, Transform: cache.TransformStripManagedFields()}
	}
	// Objects stencil applies, or that a pod template's ownerLabels made:
	// both labels. managed-by=stencil alone is a common label anyone may
	// set; the owner UID ties an object to one resource (and stencil's
	// admission policy lets only stencil set it: config/policy).
	ownerUID, err := labels.NewRequirement(v1alpha1.LabelOwnerUID, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant, valid key
	}
	stencils := labels.SelectorFromSet(labels.Set{v1alpha1.LabelManagedBy: v1alpha1.ManagedByStencil}).Add(*ownerUID)
	owned := stencils
	if reqs, selectable := shard.Requirements(); selectable {
		owned = owned.Add(reqs...) // objects carry their resource's shard label
	}
	// Observed objects (a Deployment's Pods) carry no shard label: held
	// by every shard, as they are labelled.
	observed := map[schema.GroupVersionKind]bool{}
	for _, k := range kinds {
		for _, ref := range k.Declaration().Observes {
			observed[ref.GroupVersionKind()] = true
		}
	}
	for _, k := range kinds { // a type also owned, or a kind, keeps its shard's selector
		delete(observed, k.GroupVersionKind())
		for _, ref := range k.Declaration().Owns {
			delete(observed, ref.GroupVersionKind())
		}
	}
	for gvk := range observed {
		o := &unstructured.Unstructured{}
		o.SetGroupVersionKind(gvk)
		// Nothing reads an observed object's managedFields.
		byObject[o] = cache.ByObject{Label: stencils, Transform: cache.TransformStripManagedFields()}
	}
	return cache.Options{
		DefaultLabelSelector: owned,
		DefaultTransform:     dropStatusFields,
		ByObject:             byObject,
	}
}

// dropStatusFields drops, from an owned object held in the cache, the
// managedFields entries of writes to its status subresource (a
// Deployment's, by kube-controller-manager) that record status fields only:
// no template sets them. An entry of a status write that also holds
// metadata (an annotation set through /status) stays, so that drift and
// fight messages can still name its manager, and so do entries of the
// scale subresource: an autoscaler's write of spec.replicas through it is
// what hand-over and the drift check must see. On a cluster with
// controllers this is about a kilobyte per Deployment.
func dropStatusFields(obj any) (any, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return obj, nil // a tombstone: nothing to trim
	}
	entries := m.GetManagedFields()
	kept := slices.DeleteFunc(slices.Clone(entries), statusOnly)
	if len(kept) < len(entries) {
		m.SetManagedFields(kept)
	}
	return obj, nil
}

// statusOnly: e is a status write whose fields are all under status.
func statusOnly(e metav1.ManagedFieldsEntry) bool {
	if e.Subresource != "status" || e.FieldsV1 == nil {
		return false
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(e.FieldsV1.Raw, &top); err != nil {
		return false
	}
	for k := range top {
		if k != "f:status" && k != "." {
			return false
		}
	}
	return true
}

// newApplier is the applier of kind k's objects.
func newApplier(mgr ctrl.Manager, k *render.Kind, types engine.CachedTypes, firstApplies *engine.Claims, served func(schema.GroupVersionKind) bool) (*engine.Applier, error) {
	opts := engine.Options{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Types: types, Claims: firstApplies,
		OwnerKind: k.GroupVersionKind(), Recorder: mgr.GetEventRecorder("stencil"), Served: served}
	for _, t := range k.Declaration().Owns {
		opts.Owns = append(opts.Owns, engine.OwnedType{GVK: t.GroupVersionKind(), ClusterScoped: t.ClusterScoped})
	}
	return engine.New(opts)
}

// ClientOptions makes the manager's client read unstructured objects (the
// owned types whose status templates read them whole) from the cache too;
// controller-runtime's default sends those reads to the API server.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{Unstructured: true}}
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
	served := &servedTypes{mapper: mgr.GetRESTMapper(), index: indexOwnerUID(mgr, types), known: map[schema.GroupVersionKind]bool{}}
	firstApplies := &engine.Claims{}
	var leases *shard.LeaseWatch // one per process: a shard's Lease is read once for all kinds
	if opts.Shards != nil && opts.Shards.Leases != nil {
		leases = shard.NewLeaseWatch(*opts.Shards.Leases, mgr.GetAPIReader(), mgr.GetClient())
	}
	inputs, err := inputCache(mgr, kinds, opts.Namespaces)
	if err != nil {
		return err
	}
	memo := &inputMemo{}
	// setupKind sets up the controller of k, whose type the cluster serves.
	setupKind := func(k *render.Kind) error {
		gvk := k.GroupVersionKind()
		unhealthy.track(gvk.Kind)
		startCounters(gvk.Kind)
		needs := typesOf(context.Background(), k, served)
		applier, err := newApplier(mgr, k, types, firstApplies, needs.served)
		if err != nil {
			return fmt.Errorf("%s: %w", gvk.Kind, err)
		}
		r := &Reconciler{
			client:     mgr.GetClient(),
			reader:     mgr.GetAPIReader(),
			recorder:   mgr.GetEventRecorder("stencil"),
			applier:    applier,
			rewrites:   newRewrites(),
			rollout:    rollout.New(gvk.Kind, k.Templates(), opts.Rollout),
			mayWrite:   opts.MayWrite,
			shards:     opts.Shards,
			leases:     leases,
			scheme:     mgr.GetScheme(),
			recheck:    make(chan event.GenericEvent),
			inputCache: inputs,
			inputMemo:  memo,
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
		r.rollout.List = listOf(mgr.GetClient(), mgr.GetScheme(), gvk)
		b := ctrl.NewControllerManagedBy(mgr).
			Named(strings.ToLower(gvk.Kind)).
			For(k.New(), builder.WithPredicates(predicate.Funcs{CreateFunc: r.noteOrphaningOnCreate, UpdateFunc: r.notOwnStatusWrite, DeleteFunc: r.forgetOrphaning})).
			WithOptions(controller.Options{
				MaxConcurrentReconciles: max(opts.MaxConcurrentReconciles, 1),
				SkipNameValidation:      &opts.SkipNameValidation,
				ReconciliationTimeout:   cmp.Or(opts.ReconcileTimeout, DefaultReconcileTimeout),
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
				b = b.Watches(types.NewObject(t.GroupVersionKind()), handler.EnqueueRequestsFromMapFunc(r.ownerByUID))
			}
		}
		for _, gvk := range inputTypes(k) {
			if needs.served(gvk) {
				b = b.WatchesRawSource(source.Kind[client.Object](inputs, metadataOf(gvk), r.inputHandler(gvk)))
			}
		}
		c, err := b.Build(r)
		if err != nil {
			return fmt.Errorf("setting up the %s controller: %w", gvk.Kind, err)
		}
		if len(needs.pending()) > 0 {
			mgr.GetLogger().Info("Running a kind without types the cluster does not serve; watching them once they are", "kind", gvk.Kind, "types", needs.names())
			if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { return r.awaitTypes(ctx, c, served, inputs) })); err != nil {
				return err
			}
		}
		if err := mgr.Add(manager.RunnableFunc(r.recheckUnseen)); err != nil {
			return err
		}
		if opts.Shards != nil {
			if err := mgr.Add(manager.RunnableFunc(r.releaseMoved)); err != nil {
				return err
			}
		}
		return nil
	}
	for _, k := range kinds {
		gvk := k.GroupVersionKind()
		if served.has(context.Background(), gvk) {
			if err := setupKind(k); err != nil {
				return err
			}
			continue
		}
		kindWaiting.WithLabelValues(gvk.Kind, apiVersionKind(gvk)).Set(1)
		mgr.GetLogger().Info("Not running a kind whose CRD the cluster does not serve; it starts once it is", "kind", gvk.Kind, "type", apiVersionKind(gvk))
		start := func() error {
			kindWaiting.DeleteLabelValues(gvk.Kind, apiVersionKind(gvk))
			return setupKind(k)
		}
		if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { return awaitOwnType(ctx, served, gvk, start) })); err != nil {
			return err
		}
	}
	return nil
}

// inputHandler enqueues the resources that read an input of type gvk on
// its every event, and forgets what was kept of it when it is deleted.
func (r *Reconciler) inputHandler(gvk schema.GroupVersionKind) handler.EventHandler {
	enqueue := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request { return r.inputs.readers(gvk, obj) })
	return handler.Funcs{
		CreateFunc:  enqueue.Create,
		UpdateFunc:  enqueue.Update,
		GenericFunc: enqueue.Generic,
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.inputMemo.forget(gvk, e.Object.GetNamespace(), e.Object.GetName())
			enqueue.Delete(ctx, e, q)
		},
	}
}

// inputCache is the cache of the graph kinds' inputs, metadata only and
// not limited to stencil's labels (an input is someone else's object):
// its events tell which resources to render again, whose renders then read
// the inputs from the API server. nil when no kind has inputs.
func inputCache(mgr ctrl.Manager, kinds []*render.Kind, namespaces []string) (cache.Cache, error) {
	if !slices.ContainsFunc(kinds, func(k *render.Kind) bool { return len(inputTypes(k)) > 0 }) {
		return nil, nil
	}
	opts := cache.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), DefaultTransform: cache.TransformStripManagedFields()}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	c, err := cache.New(mgr.GetConfig(), opts)
	if err != nil {
		return nil, fmt.Errorf("making the cache of the kinds' inputs: %w", err)
	}
	if err := mgr.Add(c); err != nil {
		return nil, err
	}
	return c, nil
}

// inputTypes are the types of a kind's inputs.
func inputTypes(k *render.Kind) []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	for _, in := range k.Inputs() {
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

// watchOwned watches an owned type through its one informer.
func (r *Reconciler) watchOwned(b *builder.Builder, gvk schema.GroupVersionKind) *builder.Builder {
	owned := r.applier.Types().NewObject(gvk)
	if _, metadataOnly := owned.(*metav1.PartialObjectMetadata); metadataOnly {
		return b.WatchesMetadata(owned, r.ownedObjectHandler(gvk))
	}
	return b.Watches(owned, r.ownedObjectHandler(gvk))
}

// notOwnStatusWrite drops the update event of our own status write: this
// process knows what it wrote (see currentStatus). The informer's periodic
// resync (the same version again) passes: it is the backstop that looks at
// every resource again, whatever its last write.
func (r *Reconciler) notOwnStatusWrite(e event.UpdateEvent) bool {
	r.noteOrphaning(e.ObjectNew)
	if e.ObjectOld != nil && e.ObjectOld.GetResourceVersion() == e.ObjectNew.GetResourceVersion() {
		return true
	}
	key, rv := client.ObjectKeyFromObject(e.ObjectNew), engine.ResourceVersion(e.ObjectNew)
	return !r.statusWrites.Note(key, rv, func() bool {
		w := r.memory.get(key).written
		if w == nil || w.resourceVersion != rv {
			return false
		}
		r.statusCached(key, rv)
		return true
	})
}

// recheckUnseen wakes, every third of cacheBackstop, the resources with an
// apply that the watch has not shown for cacheBackstop: its events were
// missed (a watch that expired and listed again after the object was
// deleted), so the cache alone would never tell that the object is gone.
// A resource whose applies the watch has shown is not looked at again.
func (r *Reconciler) recheckUnseen(ctx context.Context) error {
	tick := time.NewTicker(cacheBackstop / 3)
	defer tick.Stop()
	kind := r.kind().GroupVersionKind().GroupKind()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		owners := r.applier.UnseenSince(time.Now().Add(-cacheBackstop))
		if len(owners) > 0 {
			ctrl.LoggerFrom(ctx).Info("The watch has not shown some applies; looking at their resources again",
				"kind", kind.Kind, "resources", len(owners), "first", owners[:min(len(owners), 3)], "after", cacheBackstop)
		}
		for _, owner := range owners {
			gk, nn, ok := v1alpha1.ParseOwnerAnnotation(owner)
			if !ok || gk != kind {
				ctrl.LoggerFrom(ctx).Error(nil, "An applied object names an owner of another kind; not looked at again", "kind", kind.Kind, "owner", owner)
				continue
			}
			unseenRechecks.WithLabelValues(kind.Kind).Inc()
			o := r.kind().New()
			o.SetNamespace(nn.Namespace)
			o.SetName(nn.Name)
			select {
			case r.recheck <- event.GenericEvent{Object: o}:
			case <-ctx.Done():
				return nil
			}
		}
	}
}

// ownerByUID maps an observed object (a pod from a pod template with
// ownerLabels) to its custom resource through the owner UID label. Before
// the first reconcile of that resource the UID is unknown; that reconcile
// reads the object anyway.
func (r *Reconciler) ownerByUID(_ context.Context, obj client.Object) []reconcile.Request {
	nn, ok := r.owners.Load(types.UID(obj.GetLabels()[v1alpha1.LabelOwnerUID]))
	if !ok || !sameTenant(obj, nn) {
		return nil
	}
	return []reconcile.Request{{NamespacedName: nn}}
}

// ownerOf maps an owned object to its custom resource through the owner
// annotation, which namespaced and cluster-scoped objects both carry. Anyone
// who may write an object can put any labels and annotations on it: the
// object must also be in the resource's namespace (or cluster-scoped) and
// carry the UID this process knows for it, else a forged annotation would
// wake another tenant's resource at will. Before the first reconcile of a
// resource its UID is unknown; that reconcile reads its objects anyway.
func (r *Reconciler) ownerOf(_ context.Context, obj client.Object) []reconcile.Request {
	gk, owner, ok := v1alpha1.ParseOwnerAnnotation(obj.GetAnnotations()[v1alpha1.AnnotationOwner])
	nn := types.NamespacedName(owner)
	if !ok || gk != r.kind().GroupVersionKind().GroupKind() || !sameTenant(obj, nn) {
		return nil
	}
	if known, ok := r.owners.Load(types.UID(obj.GetLabels()[v1alpha1.LabelOwnerUID])); !ok || known != nn {
		return nil
	}
	return []reconcile.Request{{NamespacedName: nn}}
}

// sameTenant: obj may belong to the custom resource nn: it is in nn's
// namespace, or cluster-scoped (which only cluster administrators and
// stencil create).
func sameTenant(obj client.Object, nn types.NamespacedName) bool {
	return obj.GetNamespace() == "" || obj.GetNamespace() == nn.Namespace
}

// ownedObjectHandler enqueues the owner of an owned object on every event
// but those of our own applies (the reconcile that applied knows the
// result; but not for a graph kind, whose next nodes may render once the
// cache holds what was applied), and on a deletion also forgets the object's baseline, so that
// the next reconcile re-creates it rather than waiting for the cache, and
// enqueues the resources that were waiting for the object to go.
func (r *Reconciler) ownedObjectHandler(gvk schema.GroupVersionKind) handler.EventHandler {
	enqueue := handler.EnqueueRequestsFromMapFunc(r.ownerOf)
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if !r.applier.OwnWrite(gvk.String(), e.Object) || r.kind().HasGraph() {
				enqueue.Create(ctx, e, q)
			}
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if !r.applier.OwnWrite(gvk.String(), e.ObjectNew) || r.kind().HasGraph() {
				enqueue.Update(ctx, e, q)
			}
		},
		GenericFunc: enqueue.Generic,
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.applier.ForgetDeleted(gvk.String(), e.Object)
			enqueue.Delete(ctx, e, q)
			for _, req := range r.waiters.Take(engine.IDOf(gvk, e.Object.GetNamespace(), e.Object.GetName())) {
				q.Add(req)
			}
		},
	}
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
// them or its graph reads them; else metadata only.
func cachedTypesOf(kinds []*render.Kind, scheme *runtime.Scheme) engine.CachedTypes {
	t := engine.CachedTypes{Whole: map[schema.GroupVersionKind]bool{}, Scheme: scheme}
	for _, k := range kinds {
		for _, ref := range k.Declaration().Owns {
			// A graph kind's templates read its objects whole.
			t.Whole[ref.GroupVersionKind()] = t.Whole[ref.GroupVersionKind()] || ref.Status || ref.JudgesHealth() || k.HasGraph()
		}
		for _, ref := range k.Declaration().Observes {
			t.Whole[ref.GroupVersionKind()] = true
		}
	}
	return t
}
