package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"testing"
	"testing/fstest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/internal/testing/testkind"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
	"github.com/stencil-operator/stencil/internal/testing/testutil"
	"github.com/stencil-operator/stencil/internal/testing/testutil/testop"
	"github.com/stencil-operator/stencil/reconciler"
	"github.com/stencil-operator/stencil/render"
)

// TestKindWaitsForItsTypes: a kind that owns a type whose CRD is not
// installed runs (the operator starts) and says so in each resource's
// status (Stalled, TypeNotServed, naming the type); an optional type it
// owns holds nothing back and its template is skipped through
// capabilities. Once the CRD is installed the same operator watches the
// type, and the resource converges without a restart.
func TestKindWaitsForItsTypes(t *testing.T) {
	def := testkind.Gadget()
	def.Templates = fstest.MapFS{
		"_kind.yaml": {Data: []byte(`owns:
- {apiVersion: v1, kind: ConfigMap}
- {apiVersion: missing.stencil.dev/v1, kind: Gizmo}
- {apiVersion: optional.stencil.dev/v1, kind: Doohickey, optional: true}
`)},
		"config.yaml": {Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Name | quote }}
`)},
		"gizmo.yaml": {Data: []byte(`apiVersion: missing.stencil.dev/v1
kind: Gizmo
metadata:
  name: {{ .Name | quote }}
`)},
		"doohickey.yaml": {Data: []byte(`{{- if (capabilities).APIVersions.Has "optional.stencil.dev/v1/Doohickey" }}
apiVersion: optional.stencil.dev/v1
kind: Doohickey
metadata:
  name: {{ .Name | quote }}
{{- end }}
`)},
	}
	startGadgetKind(t, def) // fails when a missing CRD stops the operator
	ns := newNamespace(t)
	t.Cleanup(func() { deleteGadgets(t, ns) })
	g := &testv1alpha1.Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g"}}
	if err := k8s.Create(t.Context(), g); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the Gadget Stalled for the missing type", func() error {
		return errors.Join(
			gadgetCondition(t, ns, "g", v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonTypeNotServed,
				"missing.stencil.dev/v1/Gizmo", "install its CRD", "optional: true"),
			gadgetCondition(t, ns, "g", v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonTypeNotServed))
	})
	if exists(t, &corev1.ConfigMap{}, ns, "g") {
		t.Fatal("the kind applied objects while a type it needs is not served")
	}

	installCRD(t, schemalessCRD("missing.stencil.dev", "Gizmo")) // not installed when the operator starts
	installed := time.Now()
	eventually(t, 60*time.Second, "the Gadget Ready once the CRD is installed", func() error {
		return gadgetCondition(t, ns, "g", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReconciled)
	})
	t.Logf("Ready %s after the CRD was installed", time.Since(installed).Round(time.Millisecond))
	if !exists(t, &corev1.ConfigMap{}, ns, "g") {
		t.Fatal("no ConfigMap")
	}
}

// schemalessCRD is the YAML of the CRD of a namespaced type kind of group,
// at v1, whose objects hold anything.
func schemalessCRD(group, kind string) string {
	return testutil.SchemalessCRD(group, kind, render.Plural(kind))
}

// installCRD creates a CRD from YAML, waits until it is served, and deletes
// it when the test ends.
func installCRD(t *testing.T, src string) {
	t.Helper()
	cluster.Get(t)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal([]byte(src), crd); err != nil {
		t.Fatal(err)
	}
	if err := testutil.InstallCRDs(t.Context(), k8s, fstest.MapFS{"crd.yaml": {Data: []byte(src)}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.WithoutCancel(t.Context()), crd) })
}

// TestStatusSeesOptionalTypesServed: the status template's (capabilities)
// answers as the other templates' do: an optional type the cluster serves
// is served (its status fails, and the Gadget is not Ready, when it is not).
func TestStatusSeesOptionalTypesServed(t *testing.T) {
	installCRD(t, schemalessCRD("served.stencil.dev", "Doohickey")) // before the operator starts
	def := testkind.Gadget()
	def.Templates = fstest.MapFS{
		"_kind.yaml": {Data: []byte(`owns:
- {apiVersion: v1, kind: ConfigMap}
- {apiVersion: served.stencil.dev/v1, kind: Doohickey, optional: true}
`)},
		"config.yaml": {Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Name | quote }}
data:
  served: {{ (capabilities).APIVersions.Has "served.stencil.dev/v1/Doohickey" | quote }}
`)},
		"_status.yaml": {Data: []byte(`{{- $served := (capabilities).APIVersions.Has "served.stencil.dev/v1/Doohickey" }}
{{- required "the status template sees the Doohickey type not served" (ternary "yes" "" $served) | trimAll "yes" }}
`)},
	}
	startGadgetKind(t, def)
	ns := newNamespace(t)
	t.Cleanup(func() { deleteGadgets(t, ns) })
	g := &testv1alpha1.Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g"}}
	if err := k8s.Create(t.Context(), g); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the Gadget Ready", func() error {
		return gadgetCondition(t, ns, "g", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReconciled)
	})
	cm := &corev1.ConfigMap{}
	if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "g"}, cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data["served"] != "true" {
		t.Errorf("the object templates see the Doohickey served: %q, want true", cm.Data["served"])
	}
}

// TestDeleteWithTypeNotServed: a resource of a kind with an optional owned
// type the cluster does not serve is deleted: its finalizer (a graph kind
// always has one) does not wait on a list of that type, which has no
// informer.
func TestDeleteWithTypeNotServed(t *testing.T) {
	def := testkind.Gadget()
	def.Templates = fstest.MapFS{
		// The Doohickey first: the look for orphaned objects must not stop
		// at the ConfigMap, which still has its ownerReference.
		"_kind.yaml": {Data: []byte(`owns:
- {apiVersion: absent.stencil.dev/v1, kind: Doohickey, optional: true}
- {apiVersion: v1, kind: ConfigMap}
graph:
  config: {}
`)},
		"config.yaml": {Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Name | quote }}
`)},
		"doohickey.yaml": {Data: []byte(`{{- if (capabilities).APIVersions.Has "absent.stencil.dev/v1/Doohickey" }}
apiVersion: absent.stencil.dev/v1
kind: Doohickey
metadata:
  name: {{ .Name | quote }}
{{- end }}
`)},
	}
	startGadgetKind(t, def)
	ns := newNamespace(t)
	t.Cleanup(func() { deleteGadgets(t, ns) })
	g := &testv1alpha1.Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g"}}
	if err := k8s.Create(t.Context(), g); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the Gadget Ready", func() error {
		return gadgetCondition(t, ns, "g", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReconciled)
	})
	if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(g), g); err != nil {
		t.Fatal(err)
	}
	if len(g.Finalizers) == 0 {
		t.Fatal("the Gadget has no finalizer: the test needs one")
	}
	if err := k8s.Delete(t.Context(), g); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the Gadget gone", func() error {
		if exists(t, &testv1alpha1.Gadget{}, ns, "g") {
			return errors.Join(errors.New("the Gadget is still there"),
				gadgetCondition(t, ns, "g", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReconciled))
		}
		return nil
	})
}

// TestKindWhoseCRDAppears: a kind whose own CRD the cluster does not serve
// when stencil starts does not run, and the operator does; once the CRD
// is served, the same operator starts the kind, without a restart, and
// its resource becomes Ready. The Gadget CRD is deleted for the test and
// installed again.
func TestKindWhoseCRDAppears(t *testing.T) {
	cluster.Get(t)
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "gadgets.test.stencil.dev"}}
	if err := k8s.Delete(t.Context(), crd); err != nil {
		t.Fatal(err)
	}
	forgetGarbageCollector() // it learns of the new CRD anew
	reinstall := func() error {
		if err := k8s.Get(context.WithoutCancel(t.Context()), client.ObjectKeyFromObject(crd), &apiextensionsv1.CustomResourceDefinition{}); err == nil {
			return nil
		}
		return testutil.InstallCRDs(context.WithoutCancel(t.Context()), k8s, gadgetCRD(t))
	}
	t.Cleanup(func() {
		eventually(t, 60*time.Second, "the Gadget CRD installed again", reinstall)
	})
	eventually(t, 60*time.Second, "the Gadget type not served", func() error {
		resources, err := discovery.NewDiscoveryClientForConfigOrDie(cluster.Get(t).Config).ServerResourcesForGroupVersion(testv1alpha1.GroupVersion.String())
		if err != nil {
			return err
		}
		for _, r := range resources.APIResources {
			if r.Kind == "Gadget" {
				return errors.New("still served")
			}
		}
		return nil
	})
	def := testkind.Gadget()
	def.Templates = fstest.MapFS{
		"_kind.yaml": {Data: []byte("owns: [{apiVersion: v1, kind: ConfigMap}]\n")},
		"config.yaml": {Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Name | quote }}
`)},
	}
	kind, err := render.Load(def)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	stopped, err := testop.RunOperator(ctx, cluster.Get(t).Config, k8s.Scheme(), []*render.Kind{kind}, nil)
	if err != nil {
		t.Fatal(err) // a missing CRD stops the operator
	}
	if err := reinstall(); err != nil {
		t.Fatal(err)
	}
	ns := newGadgetNamespace(t)
	g := &testv1alpha1.Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g"}}
	if err := k8s.Create(t.Context(), g); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the Gadget Ready without a restart", func() error {
		select {
		case err := <-stopped:
			t.Fatalf("the manager stopped: %v", err)
		default:
		}
		return gadgetCondition(t, ns, "g", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReconciled)
	})
	if !exists(t, &corev1.ConfigMap{}, ns, "g") {
		t.Fatal("no ConfigMap")
	}
}

// gadgetCRD is the Gadget CRD alone.
func gadgetCRD(t *testing.T) fs.FS {
	t.Helper()
	data, err := fs.ReadFile(testkind.CRDs(), "test.stencil.dev_gadgets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return fstest.MapFS{"gadget.yaml": {Data: data}}
}

// TestCacheOfTypeServedLater: a type of the cache's ByObject that the
// cluster serves only after the cache was made is cached with its own
// settings once it is, not with the defaults (those of owned objects): an
// observed type under --shard is held by its labels, without the shard's.
func TestCacheOfTypeServedLater(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "late.stencil.dev", Version: "v1", Kind: "Thingamajig"}
	httpClient, err := rest.HTTPClientFor(cluster.Get(t).Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cluster.Get(t).Config, httpClient)
	if err != nil {
		t.Fatal(err)
	}
	observed := &unstructured.Unstructured{}
	observed.SetGroupVersionKind(gvk)
	c, err := reconciler.NewCache(cluster.Get(t).Config, cache.Options{
		HTTPClient: httpClient, Scheme: k8s.Scheme(), Mapper: mapper,
		DefaultLabelSelector: labels.SelectorFromSet(labels.Set{"shard": "a"}), // owned objects
		ByObject:             map[client.Object]cache.ByObject{observed: {Label: labels.SelectorFromSet(labels.Set{"observed": "yes"})}},
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(t.Context()) }()
	installCRD(t, schemalessCRD("late.stencil.dev", "Thingamajig")) // only observed, not installed when the cache is made
	ns := newNamespace(t)
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	obj.SetNamespace(ns)
	obj.SetName("t")
	obj.SetLabels(map[string]string{"observed": "yes"}) // no shard label
	if err := k8s.Create(t.Context(), obj); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the observed object in the cache", func() error {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind("ThingamajigList"))
		if err := c.List(t.Context(), list, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(list.Items) != 1 {
			return fmt.Errorf("%d objects cached", len(list.Items))
		}
		return nil
	})
}
