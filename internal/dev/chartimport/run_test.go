package chartimport_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/internal/dev/chartimport"
	"github.com/stencil-operator/stencil/pkg/stencil"
	"github.com/stencil-operator/stencil/pkg/stenciltest"
	"github.com/stencil-operator/stencil/render"
)

// TestImportedChartRunsToReady runs the test chart, imported, on the local
// control plane: its CRD with the schema of the chart's values, a resource
// that sets two values (the rest from the CRD's defaults) becomes Ready,
// its pre-install hook's Job completes before the Deployment is made, and
// a value changed through the resource changes the Deployment.
func TestImportedChartRunsToReady(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "shops.example.com", Version: "v1alpha1", Kind: "Shop"}
	def, err := chartimport.Definition("testdata/charts/shop", gvk, map[string]any{"ingress": map[string]any{"enabled": true}})
	if err != nil {
		t.Fatal(err)
	}
	cluster := stenciltest.StartCluster(t)
	cl := newClient(t, cluster, gvk)
	installCRD(t, cl, def)
	cluster.RunOperator(t, stencil.Project{Name: "shop-test", Kinds: []stencil.Kind{stencil.Kind(def)}})

	shop := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"replicaCount": 2,
		"probes":       map[string]any{"liveness": map[string]any{"periodSeconds": 7}},
	}}}
	shop.SetGroupVersionKind(gvk)
	shop.SetName("rel")
	shop.SetNamespace("default")
	if err := cl.Create(t.Context(), shop); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the Shop Ready", func() error { return ready(t, cl, shop) })
	deploy := &appsv1.Deployment{}
	key := types.NamespacedName{Namespace: "default", Name: "rel-shop"}
	if err := cl.Get(t.Context(), key, deploy); err != nil {
		t.Fatal(err)
	}
	probe := deploy.Spec.Template.Spec.Containers[0].LivenessProbe
	if *deploy.Spec.Replicas != 2 || probe.PeriodSeconds != 7 || probe.InitialDelaySeconds != 10 {
		t.Fatalf("the Deployment has %d replicas and a liveness probe every %d s after %d s; want 2, 7 (set) and 10 (the chart's nested default)",
			*deploy.Spec.Replicas, probe.PeriodSeconds, probe.InitialDelaySeconds)
	}

	// The pre-install hook's Job is a graph node the others wait for.
	job := &batchv1.Job{}
	if err := cl.Get(t.Context(), types.NamespacedName{Namespace: "default", Name: "rel-shop-migrate"}, job); err != nil {
		t.Fatal(err)
	}
	if job.Status.CompletionTime == nil || deploy.CreationTimestamp.Before(job.Status.CompletionTime) {
		t.Fatalf("the Deployment was created at %v, before the hook's Job completed (%v)", deploy.CreationTimestamp, job.Status.CompletionTime)
	}

	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicaCount":4}}`))
	if err := cl.Patch(t.Context(), shop, patch); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "4 replicas", func() error {
		if err := cl.Get(t.Context(), key, deploy); err != nil {
			return err
		}
		if *deploy.Spec.Replicas != 4 {
			return fmt.Errorf("%d replicas", *deploy.Spec.Replicas)
		}
		return nil
	})
}

func newClient(t *testing.T, cluster *stenciltest.Cluster, gvk schema.GroupVersionKind) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{appsv1.AddToScheme, batchv1.AddToScheme, apiextensionsv1.AddToScheme, chartimport.AddToScheme(gvk)} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := client.New(cluster.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// installCRD creates the kind's CRD, with the schema stencil manifests
// writes, and waits for it to be served.
func installCRD(t *testing.T, cl client.Client, def render.Definition) {
	t.Helper()
	crd, err := chartimport.CRD(def, "shops")
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Create(t.Context(), crd); err != nil {
		t.Fatal(err)
	}
	gvk := def.GroupVersionKind
	waitFor(t, "the CRD served", func() error {
		_, err := cl.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		return err
	})
}

func ready(t *testing.T, cl client.Client, o *unstructured.Unstructured) error {
	t.Helper()
	got := o.DeepCopy()
	if err := cl.Get(t.Context(), client.ObjectKeyFromObject(o), got); err != nil {
		return err
	}
	var conds []metav1.Condition
	raw, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
	for _, c := range raw {
		m, _ := c.(map[string]any)
		var cond metav1.Condition
		if runtime.DefaultUnstructuredConverter.FromUnstructured(m, &cond) == nil {
			conds = append(conds, cond)
		}
	}
	if c := meta.FindStatusCondition(conds, "Ready"); c == nil || c.Status != metav1.ConditionTrue {
		return fmt.Errorf("Ready is %+v", c)
	}
	return nil
}

func waitFor(t *testing.T, what string, check func() error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		last = check()
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, last)
	}
}
