package handwritten_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1 "github.com/stencil-operator/stencil/api/operator/v1"
	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/hack/bench/handwritten"
	"github.com/stencil-operator/stencil/internal/dev/localcluster"
	"github.com/stencil-operator/stencil/internal/testing/samples"
	"github.com/stencil-operator/stencil/internal/testing/testutil"
	"github.com/stencil-operator/stencil/internal/testing/testutil/testop"
	"github.com/stencil-operator/stencil/reconciler/shard"
	"github.com/stencil-operator/stencil/render"
)

var cluster *localcluster.Cluster

func TestMain(m *testing.M) {
	os.Exit(localcluster.RunTests(m, localcluster.Options{APIServerOnly: true}, &cluster))
}

// stencilShard is the shard the stencil of this test reconciles, so that it
// leaves the hand-written operators' MyWebs (which carry no shard label)
// alone.
const stencilShard = "stencil"

// contenders: the namespace of each operator's MyWebs, and the first node
// port of its MyWebs (node ports are unique in a cluster).
var contenders = []struct {
	namespace string
	port      int32
}{
	{stencilShard, 30100},
	{string(handwritten.VariantApply), 30200},
	{string(handwritten.VariantGetUpdate), 30300},
}

// specs are the MyWebs each operator gets, in its own namespace.
var specs = []operatorv1.MyWebSpec{
	{Image: "nginx:1.27", PageContentHtml: "<h1>one</h1>"},
	{Image: "nginx"}, // no page: an empty index.html
	{Image: "registry.example/web:2", PageContentHtml: strings.Repeat("<p>long</p>\n", 100)},
}

// TestSameObjectsAsStencil: stencil and both hand-written operators, each
// given the same MyWebs, converge them to the same objects (every field
// but stencil's own labels and annotations, the owner's UID and what the
// API server assigns) and the same status (conditions by type, status and
// reason; inventory; completed), before and after the Deployments become
// available. Then each operator reverts another manager's change of
// spec.replicas, as the bench's drift figures need.
func TestSameObjectsAsStencil(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	admin := start(ctx, t)
	for _, c := range contenders {
		createWebs(ctx, t, admin, c.namespace, c.port)
	}
	waitStatus(t, admin, "every MyWeb applied (Ready False, Progressing: no Deployment controller runs)", func(web *operatorv1.MyWeb) bool {
		return ready(web, metav1.ConditionFalse, v1alpha1.ReasonProgressing)
	})
	compareAll(ctx, t, admin)

	markAvailable(ctx, t, admin)
	waitStatus(t, admin, "every MyWeb Ready", func(web *operatorv1.MyWeb) bool {
		return ready(web, metav1.ConditionTrue, v1alpha1.ReasonReconciled) && web.Status.Completed
	})
	compareAll(ctx, t, admin)

	for _, c := range contenders {
		key := types.NamespacedName{Namespace: c.namespace, Name: "web-1"}
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		if err := admin.Patch(ctx, d, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":3}}`)), client.FieldOwner("bench-drift")); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, 20*time.Second, c.namespace+" reverts spec.replicas", func() error {
			if err := admin.Get(ctx, key, d); err != nil {
				return err
			}
			if *d.Spec.Replicas != 1 {
				return fmt.Errorf("spec.replicas %d", *d.Spec.Replicas)
			}
			return nil
		})
	}
}

// start installs the CRDs and runs stencil (as shard "stencil") and both
// hand-written operators (each in its namespace), and returns an admin
// client.
func start(ctx context.Context, t *testing.T) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), apiextensionsv1.AddToScheme(scheme), samples.AddToScheme(scheme)); err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(cluster.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := testutil.InstallCRDs(ctx, admin, os.DirFS("../../../config/crd/bases")); err != nil {
		t.Fatal(err)
	}
	for _, c := range contenders {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.namespace}}); err != nil {
			t.Fatal(err)
		}
	}
	kind := myWebKind(t)
	if err := testop.StartShard(ctx, cluster.Config, scheme, []*render.Kind{kind}, shard.Shards{Name: stencilShard, Known: []string{stencilShard}}, nil); err != nil {
		t.Fatal(err)
	}
	for _, v := range []handwritten.Variant{handwritten.VariantApply, handwritten.VariantGetUpdate} {
		mgr, err := handwritten.NewManager(cluster.Config, handwritten.Options{Variant: v, Namespace: string(v), SkipNameValidation: true})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			if err := mgr.Start(ctx); err != nil {
				t.Errorf("%s: %v", v, err)
			}
		}()
	}
	return admin
}

func myWebKind(t *testing.T) *render.Kind {
	t.Helper()
	loaded, err := samples.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range loaded {
		if k.GroupVersionKind() == operatorv1.GroupVersion.WithKind("MyWeb") {
			return k
		}
	}
	t.Fatal("no MyWeb kind")
	return nil
}

func createWebs(ctx context.Context, t *testing.T, c client.Client, namespace string, port int32) {
	t.Helper()
	for i, spec := range specs {
		web := &operatorv1.MyWeb{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("web-%d", i)}, Spec: spec}
		web.Spec.NodePortNumber = port + int32(i)
		if namespace == stencilShard {
			web.Labels = map[string]string{v1alpha1.LabelShard: stencilShard}
		}
		if err := c.Create(ctx, web); err != nil {
			t.Fatal(err)
		}
	}
}

func ready(web *operatorv1.MyWeb, status metav1.ConditionStatus, reason string) bool {
	c := meta.FindStatusCondition(web.Status.Conditions, v1alpha1.ConditionReady)
	return c != nil && c.Status == status && c.Reason == reason && c.ObservedGeneration == web.Generation &&
		web.Status.ObservedGeneration == web.Generation
}

// waitStatus waits until every MyWeb of every contender satisfies ok.
func waitStatus(t *testing.T, c client.Client, what string, ok func(*operatorv1.MyWeb) bool) {
	t.Helper()
	testutil.Eventually(t, time.Minute, what, func() error {
		var webs operatorv1.MyWebList
		if err := c.List(t.Context(), &webs); err != nil {
			return err
		}
		var not []string
		for i := range webs.Items {
			if !ok(&webs.Items[i]) {
				not = append(not, webs.Items[i].Namespace+"/"+webs.Items[i].Name)
			}
		}
		if len(not) > 0 || len(webs.Items) != len(specs)*len(contenders) {
			return fmt.Errorf("%d MyWebs; not yet: %v", len(webs.Items), not)
		}
		return nil
	})
}

// markAvailable writes every Deployment's status as the Deployment
// controller would once its pods are available.
func markAvailable(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	var list appsv1.DeploymentList
	if err := c.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		d := &list.Items[i]
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now()},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now()},
			}}
		if err := c.Status().Update(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
}

// compareAll compares each hand-written operator's objects and statuses
// with stencil's.
func compareAll(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	for _, hw := range contenders[1:] {
		for i := range specs {
			name := fmt.Sprintf("web-%d", i)
			for _, obj := range []struct{ apiVersion, kind, name string }{
				{"v1", "ConfigMap", name + "-html"}, {"apps/v1", "Deployment", name}, {"v1", "Service", name},
			} {
				want := normalized(ctx, t, c, obj.apiVersion, obj.kind, stencilShard, obj.name)
				got := normalized(ctx, t, c, obj.apiVersion, obj.kind, hw.namespace, obj.name)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s %s/%s differs from stencil's (-stencil +%s):\n%s", obj.kind, hw.namespace, obj.name, hw.namespace, diff)
				}
			}
			want, got := statusOf(ctx, t, c, stencilShard, name), statusOf(ctx, t, c, hw.namespace, name)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("MyWeb %s/%s's status differs from stencil's (-stencil +%s):\n%s", hw.namespace, name, hw.namespace, diff)
			}
		}
	}
}

// normalized is an object without what differs by design: the namespace,
// stencil's own labels and annotations, the owner's UID, what the API
// server assigns (metadata, clusterIPs, status) and the node port (each
// MyWeb has its own; checked against its spec here).
func normalized(ctx context.Context, t *testing.T, c client.Client, apiVersion, kind, namespace, name string) map[string]any {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, u); err != nil {
		t.Fatal(err)
	}
	if kind == "Service" {
		checkNodePort(ctx, t, c, u)
	}
	meta := map[string]any{"name": u.GetName(), "labels": without(u.GetLabels(), v1alpha1.LabelManagedBy), "annotations": without(u.GetAnnotations())}
	var owners []any
	for _, ref := range u.GetOwnerReferences() {
		owners = append(owners, fmt.Sprint(ref.APIVersion, ref.Kind, ref.Name, *ref.Controller, *ref.BlockOwnerDeletion))
	}
	meta["ownerReferences"] = owners
	o := u.Object
	delete(o, "status")
	o["metadata"] = meta
	unstructured.RemoveNestedField(o, "spec", "clusterIP")
	unstructured.RemoveNestedField(o, "spec", "clusterIPs")
	return o
}

// without is a copy of m without stencil's keys and the others named.
func without(m map[string]string, keys ...string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if !strings.Contains(k, "stencil.dev/") && !slices.Contains(keys, k) {
			out[k] = v
		}
	}
	return out
}

// checkNodePort checks the Service's node port against its MyWeb's spec,
// then removes it.
func checkNodePort(ctx context.Context, t *testing.T, c client.Client, svc *unstructured.Unstructured) {
	t.Helper()
	web := &operatorv1.MyWeb{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: svc.GetNamespace(), Name: svc.GetName()}, web); err != nil {
		t.Fatal(err)
	}
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	if len(ports) != 1 || ports[0].(map[string]any)["nodePort"] != int64(web.Spec.NodePortNumber) {
		t.Errorf("Service %s/%s: ports %v, want node port %d", svc.GetNamespace(), svc.GetName(), ports, web.Spec.NodePortNumber)
	}
	for _, p := range ports {
		delete(p.(map[string]any), "nodePort")
	}
	_ = unstructured.SetNestedSlice(svc.Object, ports, "spec", "ports")
}

// status is what both kinds of operator must agree on in a MyWeb's status.
type status struct {
	ObservedGeneration int64
	Conditions         map[string]string // type: status and reason
	Inventory          []string          // kind/name
	Completed          bool
}

func statusOf(ctx context.Context, t *testing.T, c client.Client, namespace, name string) status {
	t.Helper()
	web := &operatorv1.MyWeb{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, web); err != nil {
		t.Fatal(err)
	}
	s := status{ObservedGeneration: web.Status.ObservedGeneration, Conditions: map[string]string{}, Completed: web.Status.Completed}
	for _, cond := range web.Status.Conditions {
		s.Conditions[cond.Type] = string(cond.Status) + " " + cond.Reason
	}
	for _, e := range web.Status.Inventory {
		if e.Namespace != namespace {
			t.Errorf("MyWeb %s/%s: inventory entry %v in another namespace", namespace, name, e)
		}
		s.Inventory = append(s.Inventory, e.APIVersion+" "+e.Kind+"/"+e.Name)
	}
	return s
}
