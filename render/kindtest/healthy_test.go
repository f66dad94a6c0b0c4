package kindtest_test

import (
	"testing"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/render/kindtest"
)

// TestHealthyIsCurrent: every built-in type a chart renders, as a chart
// renders it (no status), is current by the kstatus rules once Healthy has
// given it a ready object's status: the import's offline run of a chart's
// hooks waits for none of them for ever.
func TestHealthyIsCurrent(t *testing.T) {
	for _, tt := range []struct{ name, doc string }{
		{"Deployment", "apiVersion: apps/v1\nkind: Deployment\nspec: {replicas: 3}"},
		{"StatefulSet", "apiVersion: apps/v1\nkind: StatefulSet\nspec: {replicas: 2}"},
		{"DaemonSet", "apiVersion: apps/v1\nkind: DaemonSet\nspec: {}"},
		{"ReplicaSet", "apiVersion: apps/v1\nkind: ReplicaSet\nspec: {replicas: 2}"},
		{"Job", "apiVersion: batch/v1\nkind: Job\nspec: {}"},
		{"CronJob", "apiVersion: batch/v1\nkind: CronJob\nspec: {schedule: '* * * * *'}"},
		{"Pod", "apiVersion: v1\nkind: Pod\nspec: {}"},
		{"PersistentVolumeClaim", "apiVersion: v1\nkind: PersistentVolumeClaim\nspec: {}"},
		{"Service ClusterIP", "apiVersion: v1\nkind: Service\nspec: {ports: [{port: 80}]}"},
		{"Service headless", "apiVersion: v1\nkind: Service\nspec: {clusterIP: None}"},
		{"Service NodePort", "apiVersion: v1\nkind: Service\nspec: {type: NodePort}"},
		{"Service LoadBalancer", "apiVersion: v1\nkind: Service\nspec: {type: LoadBalancer}"},
		{"Service ExternalName", "apiVersion: v1\nkind: Service\nspec: {type: ExternalName, externalName: example.com}"},
		{"PodDisruptionBudget", "apiVersion: policy/v1\nkind: PodDisruptionBudget\nspec: {minAvailable: 1}"},
		{"HorizontalPodAutoscaler", "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nspec: {maxReplicas: 3}"},
		{"Ingress", "apiVersion: networking.k8s.io/v1\nkind: Ingress\nspec: {}"},
		{"NetworkPolicy", "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nspec: {}"},
		{"ConfigMap", "apiVersion: v1\nkind: ConfigMap\ndata: {a: b}"},
		{"Secret", "apiVersion: v1\nkind: Secret\nstringData: {a: b}"},
		{"ServiceAccount", "apiVersion: v1\nkind: ServiceAccount"},
		{"ClusterRole", "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nrules: []"},
		{"CustomResourceDefinition", "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nspec: {group: example.com}"},
		{"ValidatingWebhookConfiguration", "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nwebhooks: []"},
		{"a custom resource", "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nspec: {}"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(tt.doc+"\nmetadata: {name: x, namespace: default}\n"), &o.Object); err != nil {
				t.Fatal(err)
			}
			got, err := kstatus.Compute(kindtest.Healthy(o))
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != kstatus.CurrentStatus {
				t.Errorf("kstatus of a healthy %s: %s (%s), want Current", tt.name, got.Status, got.Message)
			}
		})
	}
}
