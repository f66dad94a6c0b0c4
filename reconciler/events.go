package reconciler

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/reconciler/engine"
)

// The watch events that bring a resource back to its reconcile: its own,
// its objects', its observed objects' and its inputs'.

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
	return !r.statusWrites.Note(key, rv, func() bool { return r.statusCached(key, rv) })
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
			if !r.applier.OwnWrite(gvk, e.Object) || r.kind().Graph() != nil {
				enqueue.Create(ctx, e, q)
			}
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if !r.applier.OwnWrite(gvk, e.ObjectNew) || r.kind().Graph() != nil {
				enqueue.Update(ctx, e, q)
			}
		},
		GenericFunc: enqueue.Generic,
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.applier.ForgetDeleted(gvk, e.Object)
			enqueue.Delete(ctx, e, q)
			for _, req := range r.waiters.Take(engine.NewID(gvk, e.Object.GetNamespace(), e.Object.GetName())) {
				q.Add(req)
			}
		},
	}
}
