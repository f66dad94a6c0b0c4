package reconciler_test

import (
	"fmt"
	"testing"
	"testing/fstest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/internal/testing/testkind"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
	"github.com/stencil-operator/stencil/internal/testing/testutil"
)

// beyondGadget is the Gadget kind with a ConfigMap in the namespace
// beyond, which its _kind.yaml declares (as metrics-server's chart writes
// a RoleBinding in kube-system), unless the value is "drop", and one in
// the resource's namespace.
func beyondGadget(beyond string) fstest.MapFS {
	return fstest.MapFS{
		"_kind.yaml": {Data: []byte("owns:\n- {apiVersion: v1, kind: ConfigMap}\nnamespaces: [" + beyond + "]\n")},
		"here.yaml":  {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Name }}-here\ndata:\n  value: {{ .Spec.Value | quote }}\n")},
		"beyond.yaml": {Data: []byte(`{{- if ne .Spec.Value "drop" }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Namespace }}-{{ .Name }}
  namespace: ` + beyond + `
data:
  value: {{ .Spec.Value | quote }}
{{- end }}
`)},
	}
}

// TestObjectsInADeclaredNamespace: a kind writes an object in a namespace
// its _kind.yaml declares, beside the resource's: stencil applies it
// without an ownerReference (none crosses namespaces), with its finalizer
// on the resource; updates it, prunes it when the template no longer
// renders it, and deletes it with the resource. A namespace the
// declaration does not name is refused at render.
func TestObjectsInADeclaredNamespace(t *testing.T) {
	cluster.Get(t)
	beyond := testutil.NewNamespace(t, k8s)
	def := testkind.Gadget()
	def.Templates = beyondGadget(beyond)
	startGadgetKind(t, def)
	ns := newGadgetNamespace(t)
	name := ns + "-g"
	there := func() (*corev1.ConfigMap, error) {
		cm := &corev1.ConfigMap{}
		return cm, k8s.Get(t.Context(), types.NamespacedName{Namespace: beyond, Name: name}, cm)
	}
	createGadget(t, ns, "g", testv1alpha1.GadgetSpec{Value: "a"})
	eventually(t, 30*time.Second, "the ConfigMap beyond applied", func() error {
		cm, err := there()
		if err != nil {
			return err
		}
		if cm.Data["value"] != "a" {
			return fmt.Errorf("value %q", cm.Data["value"])
		}
		return gadgetCondition(t, ns, "g", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReconciled)
	})
	cm, _ := there()
	if len(cm.OwnerReferences) != 0 || cm.Labels[v1alpha1.LabelOwnerUID] == "" || cm.Annotations[v1alpha1.AnnotationOwner] == "" {
		t.Errorf("the ConfigMap beyond: ownerReferences %v, labels %v, annotations %v", cm.OwnerReferences, cm.Labels, cm.Annotations)
	}
	g := &testv1alpha1.Gadget{}
	if err := k8s.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "g"}, g); err != nil {
		t.Fatal(err)
	}
	if len(g.Finalizers) == 0 {
		t.Error("no finalizer on a resource with an object beyond its namespace")
	}

	setGadgetValue(t, ns, "drop")
	eventually(t, 30*time.Second, "the ConfigMap beyond pruned", func() error {
		if _, err := there(); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %w", err)
		}
		return nil
	})

	setGadgetValue(t, ns, "b")
	eventually(t, 30*time.Second, "the ConfigMap beyond applied again", func() error {
		_, err := there()
		return err
	})
	if err := k8s.Delete(t.Context(), g); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the ConfigMap beyond deleted with the resource", func() error {
		if _, err := there(); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %w", err)
		}
		if err := k8s.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "g"}, &testv1alpha1.Gadget{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the Gadget is still there: %w", err)
		}
		return nil
	})
}
