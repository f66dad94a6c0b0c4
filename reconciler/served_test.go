package reconciler_test

import (
	"context"
	"errors"
	"testing"
	"testing/fstest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/internal/testkind"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testkind/v1alpha1"
	"github.com/stencil-operator/stencil/internal/testutil"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// gizmoCRD is the CRD of a type the test Gadget kind below owns, not
// installed when its operator starts.
const gizmoCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gizmos.missing.stencil.dev
spec:
  group: missing.stencil.dev
  names: {kind: Gizmo, listKind: GizmoList, plural: gizmos, singular: gizmo}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

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

	installCRD(t, gizmoCRD)
	installed := time.Now()
	eventually(t, 60*time.Second, "the Gadget Ready once the CRD is installed", func() error {
		return gadgetCondition(t, ns, "g", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReconciled)
	})
	t.Logf("Ready %s after the CRD was installed", time.Since(installed).Round(time.Millisecond))
	if !exists(t, &corev1.ConfigMap{}, ns, "g") {
		t.Fatal("no ConfigMap")
	}
}

// installCRD creates a CRD from YAML, waits until it is served, and deletes
// it when the test ends.
func installCRD(t *testing.T, src string) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal([]byte(src), crd); err != nil {
		t.Fatal(err)
	}
	if err := testutil.InstallCRDs(t.Context(), k8s, fstest.MapFS{"crd.yaml": {Data: []byte(src)}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.WithoutCancel(t.Context()), crd) })
}

// doohickeyCRD is the CRD of an optional type the Gadget kind below owns,
// installed before its operator starts.
const doohickeyCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: doohickeys.served.stencil.dev
spec:
  group: served.stencil.dev
  names: {kind: Doohickey, listKind: DoohickeyList, plural: doohickeys, singular: doohickey}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// TestStatusSeesOptionalTypesServed: the status template's (capabilities)
// answers as the other templates' do: an optional type the cluster serves
// is served (its status fails, and the Gadget is not Ready, when it is not).
func TestStatusSeesOptionalTypesServed(t *testing.T) {
	installCRD(t, doohickeyCRD)
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
