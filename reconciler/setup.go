package reconciler

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/render"
)

// Options tune the controllers.
type Options struct {
	// MaxConcurrentReconciles per kind; 0 means 1.
	MaxConcurrentReconciles int
	// SkipNameValidation allows a second controller of the same name in one
	// process (tests that restart an operator in-process).
	SkipNameValidation bool
}

// CacheOptions makes the manager's cache hold only what stencil needs: every
// custom resource of the kinds, and of all other types only the objects
// labelled as stencil's.
func CacheOptions(kinds []*render.Kind) cache.Options {
	byObject := map[client.Object]cache.ByObject{}
	for _, k := range kinds {
		byObject[k.New()] = cache.ByObject{Label: labels.Everything()}
	}
	return cache.Options{
		DefaultLabelSelector: labels.SelectorFromSet(labels.Set{v1alpha1.LabelManagedBy: v1alpha1.ManagedByStencil}),
		ByObject:             byObject,
	}
}

// Setup starts one controller per kind, named after the kind, all served by
// the same generic Reconciler. Owned types are watched metadata-only.
func Setup(mgr ctrl.Manager, kinds []*render.Kind, opts Options) error {
	for _, k := range kinds {
		gvk := k.GroupVersionKind()
		r := &Reconciler{
			kind:     k,
			client:   mgr.GetClient(),
			reader:   mgr.GetAPIReader(),
			recorder: mgr.GetEventRecorder("stencil"),
			applier:  &applier{client: mgr.GetClient(), reader: mgr.GetAPIReader(), full: map[schema.GroupVersionKind]bool{}},
		}
		b := ctrl.NewControllerManagedBy(mgr).
			Named(strings.ToLower(gvk.Kind)).
			For(k.New()).
			WithOptions(controller.Options{MaxConcurrentReconciles: max(opts.MaxConcurrentReconciles, 1), SkipNameValidation: &opts.SkipNameValidation})
		for _, t := range k.Declaration().Owns {
			b = r.watchOwned(b, t)
		}
		for _, t := range k.Declaration().Observes {
			observed := &unstructured.Unstructured{}
			observed.SetGroupVersionKind(t.GroupVersionKind())
			b = b.Watches(observed, handler.EnqueueRequestsFromMapFunc(r.ownerByUID))
		}
		if err := b.Complete(r); err != nil {
			return fmt.Errorf("setting up the %s controller: %w", gvk.Kind, err)
		}
	}
	return nil
}

// watchOwned watches an owned type: whole objects when the status template
// reads them, else metadata only.
func (r *Reconciler) watchOwned(b *builder.Builder, t render.TypeRef) *builder.Builder {
	gvk := t.GroupVersionKind()
	if t.Status {
		r.applier.full[gvk] = true
		owned := &unstructured.Unstructured{}
		owned.SetGroupVersionKind(gvk)
		return b.Watches(owned, r.ownedObjectHandler(gvk.String()))
	}
	owned := &metav1.PartialObjectMetadata{}
	owned.SetGroupVersionKind(gvk)
	return b.WatchesMetadata(owned, r.ownedObjectHandler(gvk.String()))
}

// ownerByUID maps an observed object (a pod from a pod template with
// ownerLabels) to its custom resource through the owner UID label. Before
// the first reconcile of that resource the UID is unknown; that reconcile
// reads the object anyway.
func (r *Reconciler) ownerByUID(_ context.Context, obj client.Object) []reconcile.Request {
	nn, ok := r.owners.Load(types.UID(obj.GetLabels()[v1alpha1.LabelOwnerUID]))
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: nn.(types.NamespacedName)}}
}

// ownerOf maps an owned object to its custom resource through the owner
// annotation, which namespaced and cluster-scoped objects both carry.
func ownerOf(kind schema.GroupKind) handler.MapFunc {
	return func(_ context.Context, obj client.Object) []reconcile.Request {
		gk, nn, ok := render.ParseOwnerAnnotation(obj.GetAnnotations()[v1alpha1.AnnotationOwner])
		if !ok || gk != kind {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName(nn)}}
	}
}

// ownedObjectHandler enqueues the owner of an owned object on every event,
// and on a deletion also forgets the object's baseline, so that the next
// reconcile re-creates it rather than waiting for the cache.
func (r *Reconciler) ownedObjectHandler(gvk string) handler.EventHandler {
	enqueue := handler.EnqueueRequestsFromMapFunc(ownerOf(r.kind.GroupVersionKind().GroupKind()))
	return handler.Funcs{
		CreateFunc:  enqueue.Create,
		UpdateFunc:  enqueue.Update,
		GenericFunc: enqueue.Generic,
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.applier.forgetDeleted(gvk, e.Object)
			enqueue.Delete(ctx, e, q)
		},
	}
}
