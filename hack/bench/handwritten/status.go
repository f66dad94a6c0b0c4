package handwritten

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1 "github.com/stencil-operator/stencil/api/operator/v1"
	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// writeStatus writes the MyWeb's status, when it changed, as a merge patch
// of the status subresource: the conditions, the generation it reconciled,
// the inventory and completed. d is the Deployment as the cache holds it
// (nil when it does not yet); applyErr is the write of the objects' error.
func (r *reconciler) writeStatus(ctx context.Context, web *operatorv1.MyWeb, d *appsv1.Deployment, applyErr error) error {
	before := web.DeepCopy()
	setStatus(web, d, applyErr)
	if equality.Semantic.DeepEqual(before.Status, web.Status) {
		return nil
	}
	if err := r.client.Status().Patch(ctx, web, client.MergeFrom(before), client.FieldOwner(r.fieldManager)); err != nil {
		return fmt.Errorf("writing the status: %w", err)
	}
	return nil
}

func setStatus(web *operatorv1.MyWeb, d *appsv1.Deployment, applyErr error) {
	s, gen := &web.Status, web.Generation
	ready := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, ObservedGeneration: gen,
		Reason: v1alpha1.ReasonReconciled, Message: "The ConfigMap, Deployment and Service are applied and healthy."}
	switch {
	case applyErr != nil:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, v1alpha1.ReasonApplyFailed, "Apply failed: "+applyErr.Error()
	default:
		if why := progressing(web, d); why != "" {
			ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, v1alpha1.ReasonProgressing, why
		}
	}
	meta.SetStatusCondition(&s.Conditions, ready)
	if ready.Status == metav1.ConditionTrue {
		meta.RemoveStatusCondition(&s.Conditions, v1alpha1.ConditionReconciling)
	} else {
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1alpha1.ConditionReconciling, Status: metav1.ConditionTrue,
			ObservedGeneration: gen, Reason: ready.Reason, Message: ready.Message})
	}
	if applyErr != nil {
		return
	}
	meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1alpha1.ConditionDrifted, Status: metav1.ConditionFalse,
		ObservedGeneration: gen, Reason: v1alpha1.ReasonInSync, Message: "Every field the operator sets has the value it sets."})
	s.ObservedGeneration = gen
	s.Inventory = inventory(web)
	s.Completed = d != nil && d.Status.AvailableReplicas > 0 && d.Status.UpdatedReplicas == replicas(d)
}

// progressing says why the Deployment is not available yet, as kstatus
// would, or "" when it is.
func progressing(web *operatorv1.MyWeb, d *appsv1.Deployment) string {
	switch {
	case d == nil: // just created, not in the cache yet
		return fmt.Sprintf("Deployment %s: Replicas: 0/1.", web.Name)
	case d.Status.ObservedGeneration < d.Generation:
		return fmt.Sprintf("Deployment %s: Replicas: %d/%d.", d.Name, d.Status.AvailableReplicas, replicas(d))
	case d.Status.UpdatedReplicas < replicas(d), d.Status.AvailableReplicas < replicas(d), d.Status.Replicas > replicas(d):
		return fmt.Sprintf("Deployment %s: Replicas: %d/%d.", d.Name, d.Status.AvailableReplicas, replicas(d))
	}
	return ""
}

func replicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

// inventory lists the objects in stencil's order (core types first).
func inventory(web *operatorv1.MyWeb) []v1alpha1.InventoryEntry {
	return []v1alpha1.InventoryEntry{
		{APIVersion: "v1", Kind: "ConfigMap", Namespace: web.Namespace, Name: htmlName(web)},
		{APIVersion: "v1", Kind: "Service", Namespace: web.Namespace, Name: web.Name},
		{APIVersion: "apps/v1", Kind: "Deployment", Namespace: web.Namespace, Name: web.Name},
	}
}
