package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/internal/testing/testkind"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
	"github.com/stencil-operator/stencil/internal/testing/testutil/testop"
	"github.com/stencil-operator/stencil/render"
)

// strictGadget is the Gadget kind with one node whose template fails on an
// input without data (it ranges over .data, which a ConfigMap made by
// `kubectl create configmap NAME` does not have).
func strictGadget() fstest.MapFS {
	return fstest.MapFS{
		"_kind.yaml": {Data: []byte(`owns:
- {apiVersion: v1, kind: ConfigMap}
inputs:
  settings:
    apiVersion: v1
    kind: ConfigMap
    name: '{{ .Spec.Settings }}'
`)},
		"copy.yaml": {Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ printf "%s-copy" .Name | quote }}
data:
{{- range $k, $v := (input "settings").data }}
  {{ $k }}: {{ $v | quote }}
{{- end }}
`)},
	}
}

// TestGraphHealsWhenItsInputIsFixed: a resource whose render failed on an
// input's content (Stalled, RenderFailed, naming the input) renders again
// when the input is fixed, through the watch of what the failed render
// read, with no write to the resource.
func TestGraphHealsWhenItsInputIsFixed(t *testing.T) {
	def := testkind.Gadget()
	def.Templates = strictGadget()
	startGadgetKind(t, def)
	ns := newGadgetNamespace(t)
	settings := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}}
	if err := k8s.Create(t.Context(), settings); err != nil {
		t.Fatal(err)
	}
	createGadget(t, ns, "h", testv1alpha1.GadgetSpec{Settings: "settings"})
	eventually(t, 30*time.Second, "the Gadget stalled on its input's content", func() error {
		return errors.Join(
			gadgetCondition(t, ns, "h", v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonRenderFailed,
				`map has no entry for key "data"`, "ConfigMap "+ns+"/settings"),
			gadgetCondition(t, ns, "h", v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonRenderFailed))
	})
	patch := client.RawPatch(types.MergePatchType, []byte(`{"data":{"greeting":"hi"}}`))
	if err := k8s.Patch(t.Context(), settings, patch); err != nil {
		t.Fatal(err)
	}
	fixed := time.Now()
	// Well before the 5-minute retry: the watch of what the failed render read.
	eventually(t, 30*time.Second, "the Gadget Ready once its input has data", func() error {
		return gadgetCondition(t, ns, "h", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReconciled)
	})
	t.Logf("Ready %v after the input was fixed", time.Since(fixed).Round(time.Millisecond))
	cm := &corev1.ConfigMap{}
	if !exists(t, cm, ns, "h-copy") || cm.Data["greeting"] != "hi" {
		t.Fatalf("h-copy holds %v; want the input's data", cm.Data)
	}
	g := &testv1alpha1.Gadget{}
	if err := k8s.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "h"}, g); err != nil {
		t.Fatal(err)
	}
	if g.Generation != 1 {
		t.Fatal(fmt.Errorf("the Gadget's generation is %d: its spec was written; the fix must come from the input alone", g.Generation))
	}
}

// TestGraphAdoptionKeepsACreateOnlyValue: adopting, as the docs say to
// migrate an existing database, the Secret a createOnly node generates
// keeps the value it holds (the database's password), and the nodes that
// read it read that value, not a generated one.
func TestGraphAdoptionKeepsACreateOnlyValue(t *testing.T) {
	startGadgets(t)
	ns := newGadgetNamespace(t)
	createSettings(t, ns, "settings", "hi")
	owner := v1alpha1.OwnerAnnotation(testv1alpha1.GroupVersion.WithKind("Gadget"), ns, "a")
	existing := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a-token", Annotations: map[string]string{v1alpha1.AnnotationAdopt: owner}},
		Data:       map[string][]byte{"token": []byte("the-existing-password")},
	}
	if err := k8s.Create(t.Context(), existing); err != nil {
		t.Fatal(err)
	}
	createGadget(t, ns, "a", testv1alpha1.GadgetSpec{Value: "v", Settings: "settings"})
	g := &testv1alpha1.Gadget{}
	eventually(t, 30*time.Second, "the Gadget's copy of its adopted token", func() error {
		if err := k8s.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "a"}, g); err != nil {
			return err
		}
		copied := &corev1.Secret{}
		if !exists(t, copied, ns, "a-copy") {
			return errors.New("a-copy not applied yet")
		}
		if got := string(copied.Data["token"]); got != "the-existing-password" {
			return fmt.Errorf("a-copy's token is %q; want the adopted Secret's value", got)
		}
		return nil
	})
	token := &corev1.Secret{}
	if !exists(t, token, ns, "a-token") {
		t.Fatal("the adopted Secret is gone")
	}
	if token.UID != existing.UID {
		t.Fatal("the adopted Secret was deleted and made anew")
	}
	if got := string(token.Data["token"]); got != "the-existing-password" {
		t.Fatalf("the adopted Secret holds %q; its value was replaced", got)
	}
	if token.Labels[v1alpha1.LabelOwnerUID] != string(g.UID) || metav1.GetControllerOf(token) == nil {
		t.Fatalf("the Secret was not adopted: labels %v, ownerReferences %v", token.Labels, token.OwnerReferences)
	}
}

// TestOrphanDeletionLeavesEveryObject: kubectl delete --cascade=orphan of
// graph and non-graph resources, repeated, leaves every one of their
// objects in place (a graph's, which stencil deletes in order otherwise,
// and a cluster-scoped one, which no ownerReference ties to the resource);
// stencil removes only its own finalizer.
func TestOrphanDeletionLeavesEveryObject(t *testing.T) {
	startGadgets(t)
	ns := newGadgetNamespace(t)
	createSettings(t, ns, "settings", "hi")
	kinds := []schema.GroupVersionKind{
		{Version: "v1", Kind: "ConfigMap"}, {Version: "v1", Kind: "Secret"}, {Version: "v1", Kind: "Service"},
		{Group: "apps", Version: "v1", Kind: "Deployment"}, {Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"},
	}
	for round := range 3 {
		var owners []client.Object
		for i := range 2 {
			name := fmt.Sprintf("g%d-%d", round, i)
			createGadget(t, ns, name, testv1alpha1.GadgetSpec{Value: "v", Settings: "settings"})
			gate := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-gate"}}
			eventually(t, 30*time.Second, "the gate of "+name+" opened", func() error {
				return k8s.Patch(t.Context(), gate, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"test.stencil.dev/open":"yes"}}}`)))
			})
			owners = append(owners, &testv1alpha1.Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
			name = fmt.Sprintf("w%d-%d", round, i)
			createWidget(t, ns, name, testv1alpha1.WidgetSpec{Message: "m", Replicas: 1, ClusterRole: true})
			owners = append(owners, &testv1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
		}
		var objects []*unstructured.Unstructured
		for _, o := range owners {
			eventually(t, 30*time.Second, o.GetName()+" Ready", func() error {
				if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(o), o); err != nil {
					return err
				}
				c := meta.FindStatusCondition(o.(v1alpha1.Object).StencilStatus().Conditions, v1alpha1.ConditionReady)
				if c == nil || c.Status != metav1.ConditionTrue {
					return fmt.Errorf("Ready is %+v", c)
				}
				return nil
			})
			objects = append(objects, ownedObjects(t, kinds, o.GetUID())...)
		}
		for _, o := range owners {
			if err := k8s.Delete(t.Context(), o, client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil {
				t.Fatal(err)
			}
		}
		for _, o := range owners {
			eventually(t, 30*time.Second, o.GetName()+" gone", func() error {
				if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
					return fmt.Errorf("still there (finalizers %v): %w", o.GetFinalizers(), err)
				}
				return nil
			})
		}
		for _, want := range objects {
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(want.GroupVersionKind())
			err := k8s.Get(t.Context(), client.ObjectKeyFromObject(want), got)
			switch {
			case err != nil:
				t.Errorf("round %d: %s %s: %v; an orphaned object must stay", round, want.GetKind(), want.GetName(), err)
			case got.GetUID() != want.GetUID() || got.GetDeletionTimestamp() != nil:
				t.Errorf("round %d: %s %s was deleted", round, want.GetKind(), want.GetName())
			}
			if want.GetNamespace() == "" {
				_ = k8s.Delete(context.WithoutCancel(t.Context()), want)
			}
		}
		t.Logf("round %d: %d objects of %d resources left in place", round, len(objects), len(owners))
	}
}

// ownedObjects are the objects of the types that carry the owner label of
// uid.
func ownedObjects(t *testing.T, kinds []schema.GroupVersionKind, uid types.UID) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, gvk := range kinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := k8s.List(t.Context(), list, client.MatchingLabels{v1alpha1.LabelOwnerUID: string(uid)}); err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
	}
	if len(out) == 0 {
		t.Fatalf("no objects of %s", uid)
	}
	return out
}

// clusterGadget is the Gadget kind without a graph, rendering a ConfigMap
// and a ClusterRole (so its resources carry stencil's finalizer, which
// deletes the ClusterRole, which no ownerReference ties to the resource).
func clusterGadget() fstest.MapFS {
	return fstest.MapFS{
		"_kind.yaml": {Data: []byte(`owns:
- {apiVersion: v1, kind: ConfigMap}
- {apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, resource: clusterroles, clusterScoped: true}
`)},
		"configmap.yaml": {Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Name | quote }}
`)},
		"clusterrole.yaml": {Data: []byte(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ printf "gadget-%s-%s" .Namespace .Name | quote }}
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get]
`)},
	}
}

// TestOrphanDeletionWhileStencilIsDown: a resource deleted with
// propagationPolicy Orphan while no operator runs, whose orphaning the
// garbage collector finished before the operator came back (no orphan
// finalizer left to see), keeps its namespaced objects: its namespaced
// object, which lost its ownerReference, tells. Its cluster-scoped object
// goes with it: the objects alone cannot tell this from a tenant who
// stripped the ownerReferences to keep it (see
// TestStrippedOwnerReferencesKeepNoClusterScopedObject).
func TestOrphanDeletionWhileStencilIsDown(t *testing.T) {
	def := testkind.Gadget()
	def.Templates = clusterGadget()
	kind, err := render.Load(def)
	if err != nil {
		t.Fatal(err)
	}
	// The first operator's requests fail once it is stopped: whatever it
	// still had under way cannot act on the deletion.
	var stopped atomic.Bool
	wrap := func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if stopped.Load() {
				return nil, errors.New("this operator was stopped")
			}
			return rt.RoundTrip(req)
		})
	}
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	if err := testop.StartOperator(ctx, cluster.Get(t).Config, k8s.Scheme(), []*render.Kind{kind}, wrap); err != nil {
		t.Fatal(err)
	}
	ns := newNamespace(t)
	createGadget(t, ns, "o", testv1alpha1.GadgetSpec{})
	g := &testv1alpha1.Gadget{}
	eventually(t, 30*time.Second, "the Gadget Ready", func() error {
		return gadgetCondition(t, ns, "o", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReconciled)
	})
	if err := k8s.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "o"}, g); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if !exists(t, role, "", "gadget-"+ns+"-o") {
		t.Fatal("the ClusterRole was not applied")
	}
	t.Cleanup(func() { _ = k8s.Delete(context.WithoutCancel(t.Context()), role) })
	waitGarbageCollector(t) // it orphans the Gadget's objects
	stopped.Store(true)
	stop()

	if err := k8s.Delete(t.Context(), g, client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the garbage collector done orphaning", func() error {
		if err := k8s.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "o"}, g); err != nil {
			return err
		}
		cm := &corev1.ConfigMap{}
		if !exists(t, cm, ns, "o") || len(cm.OwnerReferences) > 0 || slices.Contains(g.Finalizers, metav1.FinalizerOrphanDependents) {
			return fmt.Errorf("finalizers %v, the ConfigMap's ownerReferences %v", g.Finalizers, cm.OwnerReferences)
		}
		return nil
	})

	startGadgetKind(t, def) // stencil is back
	eventually(t, 30*time.Second, "the Gadget gone", func() error {
		if err := k8s.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "o"}, g); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (finalizers %v): %w", g.Finalizers, err)
		}
		return nil
	})
	if !exists(t, &corev1.ConfigMap{}, ns, "o") {
		t.Error("the orphaned ConfigMap was deleted")
	}
	if exists(t, &rbacv1.ClusterRole{}, "", role.Name) {
		t.Error("the ClusterRole is still there: only the objects said the deletion orphaned them")
	}
}

// TestStrippedOwnerReferencesKeepNoClusterScopedObject: a tenant who may
// write its namespace's objects strips their ownerReferences to the
// resource and deletes it normally. That looks like an orphaning the
// garbage collector finished; but the API server did not ask for one, so
// the cluster-scoped object, beyond the tenant's namespace, goes with the
// resource (the namespaced one, in the tenant's namespace, stays).
func TestStrippedOwnerReferencesKeepNoClusterScopedObject(t *testing.T) {
	def := testkind.Gadget()
	def.Templates = clusterGadget()
	startGadgetKind(t, def)
	ns := newNamespace(t)
	// Drift policy Report: stencil leaves the stripped ownerReference
	// stripped (Correct would put it back, and the tenant race it).
	createGadget(t, ns, "s", testv1alpha1.GadgetSpec{DriftPolicy: v1alpha1.DriftReport})
	eventually(t, 30*time.Second, "the Gadget Ready", func() error {
		return gadgetCondition(t, ns, "s", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReconciled)
	})
	role := &rbacv1.ClusterRole{}
	if !exists(t, role, "", "gadget-"+ns+"-s") {
		t.Fatal("the ClusterRole was not applied")
	}
	t.Cleanup(func() { _ = k8s.Delete(context.WithoutCancel(t.Context()), role) })
	cm := &corev1.ConfigMap{}
	if !exists(t, cm, ns, "s") {
		t.Fatal("the ConfigMap was not applied")
	}
	strip := client.RawPatch(types.JSONPatchType, []byte(`[{"op": "remove", "path": "/metadata/ownerReferences"}]`))
	if err := k8s.Patch(t.Context(), cm, strip); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the stripped ownerReference reported as drift", func() error {
		return gadgetCondition(t, ns, "s", v1alpha1.ConditionDrifted, metav1.ConditionTrue, v1alpha1.ReasonDriftDetected)
	})
	g := &testv1alpha1.Gadget{}
	g.Namespace, g.Name = ns, "s"
	if err := k8s.Delete(t.Context(), g); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the Gadget and its ClusterRole gone", func() error {
		if err := k8s.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "s"}, g); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the Gadget is still there (finalizers %v): %w", g.Finalizers, err)
		}
		if exists(t, &rbacv1.ClusterRole{}, "", role.Name) {
			return errors.New("the ClusterRole is still there")
		}
		return nil
	})
}

// TestOrphanDeletionOfObjectsTheCollectorHasNotSeen: a resource deleted
// with propagationPolicy Orphan keeps the objects the garbage collector
// did not know of when it orphaned the others. Here they are of a type
// whose CRD was installed since the collector last looked for types (it
// looks every 30 seconds); an object created a moment before the deletion
// is another case. The collector orphans only what its graph holds, and
// once it learns of the others it deletes those whose owner is gone:
// stencil, whose finalizer holds the resource, removes the ownerReferences
// the collector left, so that none is left once the resource is gone, and
// the Thing is still there once the collector knows its type.
func TestOrphanDeletionOfObjectsTheCollectorHasNotSeen(t *testing.T) {
	for attempt := 1; ; attempt++ {
		thing, probe, exercised := orphanBeforeTheCollectorLooks(t)
		if !exercised {
			if attempt == 5 {
				t.Fatal("the garbage collector learnt of each new type before the deletion, five times: the case was not tested")
			}
			t.Logf("attempt %d: the garbage collector learnt of the new type before the deletion; again with another type", attempt)
			continue
		}
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(thing.GroupVersionKind())
		switch {
		case !exists(t, got, thing.GetNamespace(), thing.GetName()) || got.GetUID() != thing.GetUID() || got.GetDeletionTimestamp() != nil:
			t.Fatal("the Thing was deleted; an orphaned object must stay")
		case len(got.GetOwnerReferences()) > 0:
			t.Fatalf("the Thing still has ownerReferences %v once the Gadget is gone: the garbage collector will delete it", got.GetOwnerReferences())
		}
		if cm := (&corev1.ConfigMap{}); !exists(t, cm, thing.GetNamespace(), "o") || len(cm.OwnerReferences) > 0 {
			t.Errorf("the ConfigMap was deleted or kept its ownerReferences (%v)", cm.OwnerReferences)
		}
		eventually(t, 90*time.Second, "the garbage collector deleted the probe (it knows the type now)", func() error {
			if exists(t, probe, probe.GetNamespace(), probe.GetName()) {
				return errors.New("the probe is still there")
			}
			return nil
		})
		if !exists(t, got, thing.GetNamespace(), thing.GetName()) || got.GetUID() != thing.GetUID() || got.GetDeletionTimestamp() != nil {
			t.Fatal("the garbage collector deleted the Thing; an orphaned object must stay")
		}
		return
	}
}

// orphanBeforeTheCollectorLooks installs a new type, runs a graph Gadget
// kind that owns it and ConfigMaps, and deletes a Gadget with
// propagationPolicy Orphan. It returns the Gadget's Thing, a probe Thing
// whose owner does not exist (the collector deletes it once it knows the
// type), and whether the probe was still there once the Gadget was gone,
// so that the collector did not know the type when it orphaned.
func orphanBeforeTheCollectorLooks(t *testing.T) (thing, probe *unstructured.Unstructured, exercised bool) {
	t.Helper()
	waitGarbageCollector(t) // it knows Gadgets: it orphans them
	group := fmt.Sprintf("gc%d.stencil.dev", time.Now().UnixNano())
	installCRD(t, schemalessCRD(group, "Thing")) // new to the garbage collector
	def := testkind.Gadget()
	def.Templates = fstest.MapFS{
		"_kind.yaml": {Data: fmt.Appendf(nil, `owns:
- {apiVersion: v1, kind: ConfigMap}
- {apiVersion: %s/v1, kind: Thing}
graph:
  config: {}
  thing: {after: [config]}
`, group)},
		"config.yaml": {Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Name | quote }}
`)},
		"thing.yaml": {Data: fmt.Appendf(nil, `apiVersion: %s/v1
kind: Thing
metadata:
  name: {{ .Name | quote }}
`, group)},
	}
	_, stop := startGadgetKind(t, def)
	defer stop()
	ns := newGadgetNamespace(t)
	thingOf := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: "v1", Kind: "Thing"})
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}
	probe = thingOf("probe")
	probe.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "absent", UID: "00000000-0000-0000-0000-000000000000"}})
	if err := k8s.Create(t.Context(), probe); err != nil {
		t.Fatal(err)
	}
	createGadget(t, ns, "o", testv1alpha1.GadgetSpec{})
	eventually(t, 30*time.Second, "the Gadget Ready", func() error {
		return gadgetCondition(t, ns, "o", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReconciled)
	})
	g := &testv1alpha1.Gadget{}
	if err := k8s.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "o"}, g); err != nil {
		t.Fatal(err)
	}
	thing = thingOf("o")
	if !exists(t, thing, ns, "o") || len(thing.GetOwnerReferences()) != 1 || thing.GetOwnerReferences()[0].UID != g.UID {
		t.Fatalf("the Thing's ownerReferences are %v, want the Gadget's", thing.GetOwnerReferences())
	}
	if err := k8s.Delete(t.Context(), g, client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the Gadget gone", func() error {
		if err := k8s.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "o"}, g); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (finalizers %v): %w", g.Finalizers, err)
		}
		return nil
	})
	return thing, probe, exists(t, thingOf("probe"), ns, "probe")
}
