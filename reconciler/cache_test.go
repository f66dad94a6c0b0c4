package reconciler

import (
	"fmt"
	"reflect"
	goruntime "runtime"
	"strings"
	"testing"
	"testing/fstest"
	"unique"

	"github.com/stencil-operator/stencil/internal/testing/testutil"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/internal/testing/testkind"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
	"github.com/stencil-operator/stencil/reconciler/engine"
	"github.com/stencil-operator/stencil/render"
)

// TestCacheStripsManagedFieldsOfCustomResourcesOnly: the cache holds custom
// resources without managedFields, and every other type with them (the drift
// check reads them).
func TestCacheStripsManagedFieldsOfCustomResourcesOnly(t *testing.T) {
	kind, err := render.Load(testkind.Widget())
	if err != nil {
		t.Fatal(err)
	}
	opts := CacheOptions([]*render.Kind{kind})
	owned := &unstructured.Unstructured{}
	owned.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: engine.FieldManager, Operation: metav1.ManagedFieldsOperationApply}, {Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate}})
	if out, err := opts.DefaultTransform(owned.DeepCopy()); err != nil || len(out.(*unstructured.Unstructured).GetManagedFields()) != 2 {
		t.Errorf("owned objects lose managedFields entries other than status writes (%v); the drift check needs them", err)
	}
	if len(opts.ByObject) != 1 {
		t.Fatalf("%d types configured, want the one kind", len(opts.ByObject))
	}
	for obj, by := range opts.ByObject {
		if _, ok := obj.(*testv1alpha1.Widget); !ok {
			t.Fatalf("configured %T, want the kind's type", obj)
		}
		if by.Transform == nil {
			t.Fatal("custom resources are cached with their managedFields")
		}
		w := &testv1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
		out, err := by.Transform(w)
		if err != nil {
			t.Fatal(err)
		}
		if got := out.(*testv1alpha1.Widget); got.Name != "w" || got.ManagedFields != nil {
			t.Errorf("cached as %+v, want the same Widget without managedFields", got.ObjectMeta)
		}
	}
}

// TestObjectMapLeavesOutManagedFields: status templates get objects without
// managedFields, typed or not, and the object converted is left as it was.
func TestObjectMapLeavesOutManagedFields(t *testing.T) {
	fields := []metav1.ManagedFieldsEntry{{Manager: engine.FieldManager, Operation: metav1.ManagedFieldsOperationApply}}
	typed := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", ManagedFields: fields}}
	u := &unstructured.Unstructured{}
	u.SetName("web")
	u.SetManagedFields(fields)
	for _, obj := range []client.Object{typed, u} {
		t.Run(fmt.Sprintf("%T", obj), func(t *testing.T) {
			m, err := engine.ObjectMap(obj)
			if err != nil {
				t.Fatal(err)
			}
			if name, _, _ := unstructured.NestedString(m, "metadata", "name"); name != "web" {
				t.Errorf("name %q, want web", name)
			}
			if _, found, _ := unstructured.NestedFieldNoCopy(m, "metadata", "managedFields"); found {
				t.Error("the map holds managedFields")
			}
			if len(obj.GetManagedFields()) != 1 {
				t.Errorf("the object's managedFields became %v", obj.GetManagedFields())
			}
		})
	}
}

// TestCacheTrimsWhatHealthAndStatusRead: an unstructured object of a type
// a Widget's health rules read (a Deployment, were it not typed), owned
// by a Widget (its owner annotation), is cached trimmed to what stencil
// reads: the template's fields, status, metadata and managedFields,
// without the pod template's defaults. Another
// kind's object, a typed object and a metadata-only object pass through.
func TestCacheTrimsWhatHealthAndStatusRead(t *testing.T) {
	kind, err := render.Load(testkind.Widget())
	if err != nil {
		t.Fatal(err)
	}
	opts := CacheOptions([]*render.Kind{kind})
	ours := `{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:image":{},"f:name":{},"f:ports":{"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{}},"k:{\"containerPort\":443,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{}}}}}}}}}`
	owner := v1alpha1.OwnerAnnotation(kind.GroupVersionKind(), "ns", "w")
	typed := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{v1alpha1.AnnotationOwner: owner}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: engine.FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: metav1.NewFieldsV1(ours)}}},
		Spec: appsv1.DeploymentSpec{Replicas: new(int32(2)), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			DNSPolicy:  corev1.DNSClusterFirst,
			Containers: []corev1.Container{{Name: "web", Image: "nginx", TerminationMessagePath: "/dev/termination-log"}},
		}}},
		Status: appsv1.DeploymentStatus{ReadyReplicas: 2},
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
	if err != nil {
		t.Fatal(err)
	}
	d := &unstructured.Unstructured{Object: m}
	d.SetAPIVersion("apps/v1")
	d.SetKind("Deployment")
	out, err := opts.DefaultTransform(d.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*unstructured.Unstructured)
	if _, found, _ := unstructured.NestedString(got.Object, "spec", "template", "spec", "dnsPolicy"); found {
		t.Errorf("the cached object keeps the API server's defaults: %v", got.Object["spec"])
	}
	containers, _, _ := unstructured.NestedSlice(got.Object, "spec", "template", "spec", "containers")
	replicas, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas")
	ready, _, _ := unstructured.NestedInt64(got.Object, "status", "readyReplicas")
	if len(containers) != 1 || containers[0].(map[string]any)["image"] != "nginx" || containers[0].(map[string]any)["terminationMessagePath"] != nil || replicas != 2 || ready != 2 || got.GetName() != "web" {
		t.Errorf("the cached object lost what stencil reads, or kept what it does not: %v", got.Object)
	}
	if !reflect.DeepEqual(got.Object["metadata"], d.Object["metadata"]) {
		t.Errorf("the cached object's metadata changed: %v", got.Object["metadata"])
	}
	other := d.DeepCopy()
	other.SetAnnotations(map[string]string{v1alpha1.AnnotationOwner: "AppStack.stacks.example.com/ns/s"})
	if out, err := opts.DefaultTransform(other.DeepCopy()); err != nil || !reflect.DeepEqual(out.(*unstructured.Unstructured).Object["spec"], other.Object["spec"]) {
		t.Errorf("another kind's object was trimmed (%v)", err)
	}
	if out, err := opts.DefaultTransform(typed.DeepCopy()); err != nil || out.(*appsv1.Deployment).Spec.Template.Spec.DNSPolicy == "" {
		t.Errorf("a typed Deployment was trimmed (%v); typed objects are kept whole", err)
	}
	cm := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "c", ManagedFields: typed.ManagedFields}}
	if out, err := opts.DefaultTransform(cm); err != nil || out != cm {
		t.Errorf("a metadata-only object was not passed through: %v", err)
	}
}

// TestObservedObjectsShareLabelStrings: the cache's transform of an
// observed type (Pods) drops managedFields and, as for owned objects,
// gives two pods decoded apart one copy of a label they share.
func TestObservedObjectsShareLabelStrings(t *testing.T) {
	kind, err := render.Load(render.Definition{
		GroupVersionKind: testv1alpha1.GroupVersion.WithKind("Gadget"),
		New:              func() v1alpha1.Object { return &testv1alpha1.Gadget{} },
		Templates: fstest.MapFS{
			"_kind.yaml": {Data: []byte("owns: [{apiVersion: v1, kind: ConfigMap}]\nobserves: [{apiVersion: v1, kind: Pod}]\n")},
			"cm.yaml":    {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n")},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var transform func(any) (any, error)
	for obj, by := range CacheOptions([]*render.Kind{kind}).ByObject {
		if obj.GetObjectKind().GroupVersionKind() == corev1.SchemeGroupVersion.WithKind("Pod") {
			transform = by.Transform
		}
	}
	if transform == nil {
		t.Fatal("the cache has no entry for the observed Pods")
	}
	pod := func() *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			Labels:        map[string]string{strings.Clone(v1alpha1.LabelOwnerUID): strings.Clone("0b6f5a3e")},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}},
		}}
	}
	// The canonical strings live while a handle does: a collection between
	// the two transforms would otherwise give the second pod new copies.
	held := []unique.Handle[string]{unique.Make(v1alpha1.LabelOwnerUID), unique.Make("0b6f5a3e")}
	defer goruntime.KeepAlive(held)
	var cached []*metav1.PartialObjectMetadata
	for range 2 {
		out, err := transform(pod())
		if err != nil {
			t.Fatal(err)
		}
		p := out.(*metav1.PartialObjectMetadata)
		if p.ManagedFields != nil || p.Labels[v1alpha1.LabelOwnerUID] != "0b6f5a3e" {
			t.Fatalf("cached as %+v, want the labels without managedFields", p.ObjectMeta)
		}
		cached = append(cached, p)
	}
	if copied := testutil.CopiedTwice(cached[0].Labels, cached[1].Labels); len(copied) > 0 {
		t.Errorf("labels %v: the two pods hold two copies", copied)
	}
}

// TestInputTransform: the graph kinds' input cache keeps of an object what
// is read of it (name, labels, resourceVersion), without its annotations
// and managedFields.
func TestInputTransform(t *testing.T) {
	in := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: "settings", Namespace: "shop", ResourceVersion: "42",
		Labels:        map[string]string{"app": "shop"},
		Annotations:   map[string]string{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 4096)},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
	}}
	out, err := inputTransform()(in)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*metav1.PartialObjectMetadata)
	if got.Name != "settings" || got.Namespace != "shop" || got.ResourceVersion != "42" || got.Labels["app"] != "shop" {
		t.Errorf("cached as %+v, want its name, labels and resourceVersion", got.ObjectMeta)
	}
	if got.Annotations != nil || got.ManagedFields != nil {
		t.Errorf("cached with annotations %v and managedFields %v, which nothing reads", got.Annotations, got.ManagedFields)
	}
}
