package handwritten

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1 "github.com/stencil-operator/stencil/api/operator/v1"
)

// applyObjects server-side-applies the MyWeb's three objects, built as
// typed apply configurations, with one field manager and force.
func (r *reconciler) applyObjects(ctx context.Context, web *operatorv1.MyWeb) error {
	for _, obj := range []runtime.ApplyConfiguration{configMapApply(web), deploymentApply(web), serviceApply(web)} {
		if err := r.client.Apply(ctx, obj, client.FieldOwner(r.fieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying: %w", err)
		}
	}
	return nil
}

func owner(web *operatorv1.MyWeb) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(operatorv1.GroupVersion.String()).WithKind("MyWeb").
		WithName(web.Name).WithUID(web.UID).
		WithController(true).WithBlockOwnerDeletion(true)
}

func configMapApply(web *operatorv1.MyWeb) *corev1ac.ConfigMapApplyConfiguration {
	return corev1ac.ConfigMap(htmlName(web), web.Namespace).
		WithLabels(labels(web)).WithOwnerReferences(owner(web)).
		WithData(map[string]string{"index.html": web.Spec.PageContentHtml})
}

func deploymentApply(web *operatorv1.MyWeb) *appsv1ac.DeploymentApplyConfiguration {
	container := corev1ac.Container().
		WithName("web").WithImage(web.Spec.Image).
		WithPorts(corev1ac.ContainerPort().WithName("http").WithContainerPort(webPort).WithProtocol(corev1.ProtocolTCP)).
		WithVolumeMounts(corev1ac.VolumeMount().WithName("html").WithMountPath(htmlMount).WithReadOnly(true))
	pod := corev1ac.PodTemplateSpec().
		WithLabels(labels(web)).WithAnnotations(map[string]string{"checksum/html": htmlChecksum(web)}).
		WithSpec(corev1ac.PodSpec().
			WithContainers(container).
			WithVolumes(corev1ac.Volume().WithName("html").WithConfigMap(corev1ac.ConfigMapVolumeSource().WithName(htmlName(web)))))
	return appsv1ac.Deployment(web.Name, web.Namespace).
		WithLabels(labels(web)).WithOwnerReferences(owner(web)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(1).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(selector(web))).
			WithTemplate(pod))
}

func serviceApply(web *operatorv1.MyWeb) *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service(web.Name, web.Namespace).
		WithLabels(labels(web)).WithOwnerReferences(owner(web)).
		WithSpec(corev1ac.ServiceSpec().
			WithType(corev1.ServiceTypeNodePort).
			WithSelector(selector(web)).
			WithPorts(corev1ac.ServicePort().
				WithName("http").WithPort(webPort).WithTargetPort(intstr.FromString("http")).
				WithProtocol(corev1.ProtocolTCP).WithNodePort(web.Spec.NodePortNumber)))
}
