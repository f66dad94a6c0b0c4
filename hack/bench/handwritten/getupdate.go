package handwritten

import (
	"context"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	operatorv1 "github.com/stencil-operator/stencil/api/operator/v1"
)

// getUpdateObjects is the seed tutorials' way: for each object, Get it (from
// the cache), Create it when it is missing, and Update it when a field the
// operator sets differs. It compares exactly the fields it copies; within
// them, what the wanted object leaves empty (the API server's defaults) is
// left as it is: equality.Semantic.DeepDerivative ignores it.
func (r *reconciler) getUpdateObjects(ctx context.Context, web *operatorv1.MyWeb) error {
	cm, foundCM := configMap(web), &corev1.ConfigMap{}
	err := r.ensure(ctx, web, cm, foundCM,
		func() bool { return labelsDiffer(cm, foundCM) || !equality.Semantic.DeepEqual(cm.Data, foundCM.Data) },
		func() { foundCM.Data = cm.Data })
	if err != nil {
		return err
	}
	d, foundD := deployment(web), &appsv1.Deployment{}
	err = r.ensure(ctx, web, d, foundD,
		func() bool {
			return labelsDiffer(d, foundD) || !equality.Semantic.DeepDerivative(d.Spec.Replicas, foundD.Spec.Replicas) ||
				!equality.Semantic.DeepDerivative(d.Spec.Template, foundD.Spec.Template)
		},
		func() { foundD.Spec.Replicas, foundD.Spec.Template = d.Spec.Replicas, d.Spec.Template })
	if err != nil {
		return err
	}
	svc, foundSvc := service(web), &corev1.Service{}
	return r.ensure(ctx, web, svc, foundSvc,
		func() bool {
			return labelsDiffer(svc, foundSvc) || !equality.Semantic.DeepDerivative(svc.Spec, foundSvc.Spec)
		},
		func() {
			foundSvc.Spec.Type, foundSvc.Spec.Selector, foundSvc.Spec.Ports = svc.Spec.Type, svc.Spec.Selector, svc.Spec.Ports
		})
}

// ensure creates want when it does not exist (found is read into), or
// updates found with update when differs says it must.
func (r *reconciler) ensure(ctx context.Context, web *operatorv1.MyWeb, want, found client.Object, differs func() bool, update func()) error {
	err := r.client.Get(ctx, client.ObjectKeyFromObject(want), found)
	switch {
	case apierrors.IsNotFound(err):
		if err := controllerutil.SetControllerReference(web, want, r.client.Scheme()); err != nil {
			return err
		}
		if err := r.client.Create(ctx, want, client.FieldOwner(r.fieldManager)); err != nil {
			return r.createFailed(ctx, want, err)
		}
		return nil
	case err != nil:
		return err
	case !differs():
		return nil
	}
	update()
	l := found.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	maps.Copy(l, want.GetLabels())
	found.SetLabels(l)
	if err := r.client.Update(ctx, found, client.FieldOwner(r.fieldManager)); err != nil {
		return fmt.Errorf("updating %T %s: %w", found, found.GetName(), err)
	}
	return nil
}

// labelsDiffer: a label the operator sets is missing or has another value.
func labelsDiffer(want, found client.Object) bool {
	return !equality.Semantic.DeepDerivative(want.GetLabels(), found.GetLabels())
}

// createFailed is the error of a create of want that the API server
// refused. When want exists (the cache is behind an earlier create of
// ours), it is AlreadyExists, whatever the API server said: a Service
// created again with its node port is refused "port already allocated"
// (422) before the name is checked.
func (r *reconciler) createFailed(ctx context.Context, want client.Object, err error) error {
	if !apierrors.IsAlreadyExists(err) && r.reader != nil {
		existing := want.DeepCopyObject().(client.Object)
		if r.reader.Get(ctx, client.ObjectKeyFromObject(want), existing) == nil {
			gvk := want.GetObjectKind().GroupVersionKind()
			return apierrors.NewAlreadyExists(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, want.GetName())
		}
	}
	return fmt.Errorf("creating %T %s: %w", want, want.GetName(), err)
}
