package reconciler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/render"
)

// Field managers: one for the objects stencil applies, one for the custom
// resources' status.
const (
	FieldManager       = "stencil"
	StatusFieldManager = "stencil-status"
)

// finalizer is set on custom resources whose render holds cluster-scoped
// objects, which no ownerReference can clean up.
const finalizer = "stencil.dev/cleanup"

// Reconciler reconciles the custom resources of one kind. One generic type
// serves every kind.
type Reconciler struct {
	kind     *render.Kind
	client   client.Client
	reader   client.Reader // uncached, for the full objects behind a drift report
	recorder events.EventRecorder
	applier  *applier
	written  sync.Map // client.ObjectKey → writtenStatus
	// statusWrites tells the watch events of our status writes from others'.
	statusWrites ownWrites[client.ObjectKey]
	owners       sync.Map // owner UID → request, to map observed objects to their custom resource
}

// Reconcile renders, applies, prunes and writes status, in that order.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (ret reconcile.Result, err error) {
	log := ctrl.LoggerFrom(ctx)
	cr := r.kind.New()
	if err := r.client.Get(ctx, req.NamespacedName, cr); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !cr.GetDeletionTimestamp().IsZero() {
		return reconcile.Result{}, r.finalize(ctx, cr)
	}
	current, err := r.currentStatus(cr)
	if err != nil {
		return reconcile.Result{}, err
	}
	before := cr.StencilStatus().DeepCopy()
	res := &result{generation: cr.GetGeneration()}
	r.owners.Store(cr.GetUID(), req.NamespacedName)
	defer func() {
		countObjects(r.kind.GroupVersionKind().Kind, res, cr.StencilDriftPolicy())
		err = errors.Join(err, r.writeStatus(ctx, cr, current, res))
		if res.othersWrote && err == nil {
			// Another writer changed an object while we wrote it.
			ret.RequeueAfter = time.Millisecond
		}
	}()

	if res.desired, res.renderErr = r.kind.Render(cr); res.renderErr != nil {
		log.Info("Render failed", "error", res.renderErr.Error())
		// A retry cannot fix a template error; a spec change triggers a new reconcile.
		return reconcile.Result{}, reconcile.TerminalError(res.renderErr)
	}
	if len(res.desired) == 0 && len(before.Inventory) > 0 {
		res.emptyRender = true
		return reconcile.Result{}, nil
	}
	if err := r.ensureFinalizer(ctx, cr, res.desired); err != nil {
		return reconcile.Result{}, err
	}
	var out applyOutcome
	out, res.applyErr = r.applier.apply(ctx, cr, res.desired)
	res.applied, res.live, res.drift, res.othersWrote = out.applied, out.live, out.drift, out.othersWrote
	if res.applyErr != nil {
		log.Error(res.applyErr, "Apply failed; nothing pruned")
		return reconcile.Result{}, res.applyErr
	}
	res.pruned, res.pruneErr = r.prune(ctx, cr, res.desired)
	if res.pruneErr != nil {
		return reconcile.Result{}, res.pruneErr
	}
	if res.kindStatus, res.statusErr = r.kindStatus(ctx, cr, res); res.statusErr != nil {
		return reconcile.Result{}, res.statusErr
	}
	if len(res.applied)+len(res.pruned) > 0 {
		log.V(1).Info("Reconciled", "applied", len(res.applied), "pruned", len(res.pruned), "cr", klog.KObj(cr))
	}
	return reconcile.Result{}, nil
}

// forget drops what this process remembers of a deleted custom resource.
func (r *Reconciler) forget(nn types.NamespacedName) {
	unhealthy.forget(r.kind.GroupVersionKind().Kind, nn)
	r.written.Delete(nn)
	r.owners.Range(func(uid, owner any) bool {
		if owner == nn {
			r.owners.Delete(uid)
		}
		return true
	})
}

// result is what one reconcile saw and did; status is computed from it.
type result struct {
	generation int64
	desired    []*unstructured.Unstructured
	applied    []*unstructured.Unstructured
	live       map[string]client.Object
	// othersWrote: another writer changed an object (or the custom
	// resource) while we wrote it.
	othersWrote bool
	pruned      []v1alpha1.InventoryEntry
	drift       []v1alpha1.ObjectDrift
	renderErr   error
	applyErr    error
	pruneErr    error
	statusErr   error
	emptyRender bool
	// kindStatus holds the fields of the kind's status template.
	kindStatus map[string]any
}

// ok is true when every phase succeeded.
func (res *result) ok() bool {
	return res.renderErr == nil && res.applyErr == nil && res.pruneErr == nil && res.statusErr == nil && !res.emptyRender
}

// ensureFinalizer adds the cleanup finalizer before any cluster-scoped object
// is applied.
func (r *Reconciler) ensureFinalizer(ctx context.Context, cr v1alpha1.Object, desired []*unstructured.Unstructured) error {
	if controllerutil.ContainsFinalizer(cr, finalizer) || !anyClusterScoped(desired) {
		return nil
	}
	patch := client.MergeFrom(cr.DeepCopyObject().(client.Object))
	controllerutil.AddFinalizer(cr, finalizer)
	if err := r.client.Patch(ctx, cr, patch); err != nil {
		return fmt.Errorf("adding finalizer: %w", err)
	}
	return nil
}

func anyClusterScoped(objs []*unstructured.Unstructured) bool {
	for _, o := range objs {
		if o.GetNamespace() == "" {
			return true
		}
	}
	return false
}

// finalize deletes the cluster-scoped objects of a custom resource being
// deleted (namespaced ones go with it through their ownerReference), then
// removes the finalizer.
func (r *Reconciler) finalize(ctx context.Context, cr v1alpha1.Object) error {
	if !controllerutil.ContainsFinalizer(cr, finalizer) {
		return nil
	}
	if _, err := r.prune(ctx, cr, nil); err != nil {
		return fmt.Errorf("cleaning up before deletion: %w", err)
	}
	patch := client.MergeFrom(cr.DeepCopyObject().(client.Object))
	controllerutil.RemoveFinalizer(cr, finalizer)
	if err := r.client.Patch(ctx, cr, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing finalizer: %w", err)
	}
	return nil
}
