package handwritten

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	operatorv1 "github.com/stencil-operator/stencil/api/operator/v1"
)

// What templates/myweb renders, in Go.
const (
	webPort   = 80
	htmlMount = "/usr/share/nginx/html"
)

// htmlName is the ConfigMap's name; the Deployment and Service take the
// MyWeb's.
func htmlName(web *operatorv1.MyWeb) string { return web.Name + "-html" }

// selector are the labels the Service selects the pods by.
func selector(web *operatorv1.MyWeb) map[string]string {
	instance := web.Name
	if len(instance) > 63 {
		instance = instance[:63]
	}
	return map[string]string{
		"app.kubernetes.io/name":     "myweb",
		"app.kubernetes.io/instance": strings.TrimSuffix(instance, "-"),
	}
}

// labels are every object's labels: the selector's and the component.
func labels(web *operatorv1.MyWeb) map[string]string {
	l := selector(web)
	l["app.kubernetes.io/component"] = "web"
	return l
}

// htmlChecksum goes into the pod template, so that a new page rolls the
// pods.
func htmlChecksum(web *operatorv1.MyWeb) string {
	sum := sha256.Sum256([]byte(web.Spec.PageContentHtml))
	return hex.EncodeToString(sum[:])[:16]
}

// The typed objects, for the get-then-create-or-update variant. Their owner
// reference is set by the caller (controllerutil.SetControllerReference).

func configMap(web *operatorv1.MyWeb) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: htmlName(web), Namespace: web.Namespace, Labels: labels(web)},
		Data:       map[string]string{"index.html": web.Spec.PageContentHtml},
	}
}

func deployment(web *operatorv1.MyWeb) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: web.Name, Namespace: web.Namespace, Labels: labels(web)},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: selector(web)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels(web), Annotations: map[string]string{"checksum/html": htmlChecksum(web)}},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name:         "web",
						Image:        web.Spec.Image,
						Ports:        []corev1.ContainerPort{{Name: "http", ContainerPort: webPort, Protocol: corev1.ProtocolTCP}},
						VolumeMounts: []corev1.VolumeMount{{Name: "html", MountPath: htmlMount, ReadOnly: true}},
					}},
					Volumes: []corev1.Volume{{Name: "html", VolumeSource: corev1.VolumeSource{
						ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: htmlName(web)}},
					}}},
				},
			},
		},
	}
}

func service(web *operatorv1.MyWeb) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: web.Name, Namespace: web.Namespace, Labels: labels(web)},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeNodePort,
			Selector: selector(web),
			Ports: []corev1.ServicePort{{
				Name: "http", Port: webPort, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP,
				NodePort: web.Spec.NodePortNumber,
			}},
		},
	}
}
