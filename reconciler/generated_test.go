package reconciler_test

import (
	"fmt"
	"testing"
	"testing/fstest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/internal/testing/testkind"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
	"github.com/stencil-operator/stencil/reconciler"
)

// generatingGadget is the Gadget kind as a chart whose templates generate
// a password and a CA, as postgresql's and grafana's do, and a ConfigMap
// holding the spec's value and a checksum of the Secret's template.
func generatingGadget() fstest.MapFS {
	return fstest.MapFS{
		"_kind.yaml":  {Data: []byte("owns:\n- {apiVersion: v1, kind: ConfigMap}\n- {apiVersion: v1, kind: Secret}\n")},
		"_chart.yaml": {Data: []byte("name: gadget\nversion: 0.1.0\n")},
		"secret.yaml": {Data: []byte(`{{- $ca := genCA "gadget-ca" 365 -}}
apiVersion: v1
kind: Secret
metadata:
  name: {{ .Release.Name }}-auth
stringData:
  password: {{ randAlphaNum 20 | quote }}
  ca.crt: {{ $ca.Cert | quote }}
`)},
		"configmap.yaml": {Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-app
  annotations:
    checksum/auth: {{ include (print $.Template.BasePath "/secret.yaml") . | sha256sum }}
data:
  value: {{ .Values.value | quote }}
`)},
	}
}

// TestGeneratedValuesAreKept: a chart kind's generated password and CA
// are made once and kept in the resource's Secret of generated values,
// which stencil writes before it applies them: a value change, and an
// operator started again (nothing in memory), render the same ones, and
// the checksum derived from them does not change. A Secret of that name
// that is not stencil's stops the resource with GeneratedValuesFailed,
// and nothing is applied.
func TestGeneratedValuesAreKept(t *testing.T) {
	def := testkind.Gadget()
	def.Templates = generatingGadget()
	_, stop := startGadgetKind(t, def)
	ns := newGadgetNamespace(t)
	createGadget(t, ns, "g", testv1alpha1.GadgetSpec{Value: "a"})
	waitGadgetValue(t, ns, "a")
	auth := readAuth(t, ns)
	sum := readApp(t, ns).Annotations["checksum/auth"]
	if len(auth["password"]) != 20 || len(auth["ca.crt"]) < 100 {
		t.Fatalf("the Secret holds %q: no generated password or CA", auth)
	}
	gadget := &testv1alpha1.Gadget{}
	if err := k8s.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "g"}, gadget); err != nil {
		t.Fatal(err)
	}
	kept := &corev1.Secret{}
	if err := k8s.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: reconciler.GeneratedSecretName(gadget.UID)}, kept); err != nil {
		t.Fatalf("the Secret of generated values: %v", err)
	}
	if len(kept.Data) != 2 || len(kept.OwnerReferences) != 1 || kept.OwnerReferences[0].UID != gadget.UID ||
		kept.Labels[reconciler.LabelGeneratedFor] != string(gadget.UID) || kept.Labels[v1alpha1.LabelManagedBy] != "" {
		t.Errorf("the Secret of generated values: %d values, owners %v, labels %v", len(kept.Data), kept.OwnerReferences, kept.Labels)
	}

	same := func(when string) {
		t.Helper()
		if got := readAuth(t, ns); got["password"] != auth["password"] || got["ca.crt"] != auth["ca.crt"] {
			t.Errorf("%s: the generated values changed", when)
		}
		if got := readApp(t, ns).Annotations["checksum/auth"]; got != sum {
			t.Errorf("%s: the checksum changed from %s to %s", when, sum, got)
		}
	}
	setGadgetValue(t, ns, "b")
	waitGadgetValue(t, ns, "b")
	same("after a value change")

	stop()
	_, stop = startGadgetKind(t, def)
	setGadgetValue(t, ns, "c")
	waitGadgetValue(t, ns, "c")
	same("after the operator started again")

	// A person's Secret in the place of stencil's, seen by an operator
	// started again.
	if err := k8s.Delete(t.Context(), kept); err != nil {
		t.Fatal(err)
	}
	forged := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: kept.Name}, Data: map[string][]byte{"x": []byte(`"chosen"`)}}
	if err := k8s.Create(t.Context(), forged); err != nil {
		t.Fatal(err)
	}
	stop()
	startGadgetKind(t, def)
	setGadgetValue(t, ns, "d")
	eventually(t, 30*time.Second, "GeneratedValuesFailed", func() error {
		return gadgetCondition(t, ns, "g", v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonGeneratedValuesFailed,
			"is not the one stencil keeps", "Nothing was applied")
	})
	if got := readApp(t, ns).Data["value"]; got != "c" {
		t.Errorf("the value %q was applied with the person's Secret in place", got)
	}
	if got := &(corev1.Secret{}); k8s.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: kept.Name}, got) != nil || string(got.Data["x"]) != `"chosen"` || len(got.Data) != 1 {
		t.Errorf("stencil changed the person's Secret: %v", got.Data)
	}
}

// setGadgetValue sets the value of the Gadget g of ns.
func setGadgetValue(t *testing.T, ns, value string) {
	t.Helper()
	eventually(t, 30*time.Second, "the Gadget's value set", func() error {
		g := &testv1alpha1.Gadget{}
		if err := k8s.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "g"}, g); err != nil {
			return err
		}
		g.Spec.Value = value
		return k8s.Update(t.Context(), g)
	})
}

// waitGadgetValue waits for the Gadget g of ns to be Ready with value
// applied.
func waitGadgetValue(t *testing.T, ns, value string) {
	t.Helper()
	eventually(t, 60*time.Second, "the Gadget Ready with value "+value, func() error {
		if got := readApp(t, ns).Data["value"]; got != value {
			return fmt.Errorf("value %q", got)
		}
		return gadgetCondition(t, ns, "g", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReconciled)
	})
}

// readApp is the ConfigMap g-app of ns (an empty one when there is none).
func readApp(t *testing.T, ns string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := k8s.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "g-app"}, cm); err != nil {
		return &corev1.ConfigMap{}
	}
	return cm
}

// readAuth is the data of the Secret g-auth of ns.
func readAuth(t *testing.T, ns string) map[string]string {
	t.Helper()
	s := &corev1.Secret{}
	if err := k8s.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "g-auth"}, s); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range s.Data {
		out[k] = string(v)
	}
	return out
}

// TestLookupReadsTheLiveSecret: a chart kind that keeps its password the
// way bitnami's charts do (lookup of its own Secret, randAlphaNum only when
// there is none) reads the whole live Secret, not the cache's metadata:
// after a value change the resource is Ready with the same password.
func TestLookupReadsTheLiveSecret(t *testing.T) {
	def := testkind.Gadget()
	def.Templates = fstest.MapFS{
		"_kind.yaml":  {Data: []byte("owns:\n- {apiVersion: v1, kind: ConfigMap}\n- {apiVersion: v1, kind: Secret}\n")},
		"_chart.yaml": {Data: []byte("name: gadget\nversion: 0.1.0\n")},
		"secret.yaml": {Data: []byte(`{{- $live := lookup "v1" "Secret" .Release.Namespace (printf "%s-auth" .Release.Name) -}}
apiVersion: v1
kind: Secret
metadata:
  name: {{ .Release.Name }}-auth
data:
  {{- if $live }}
  password: {{ index $live.data "password" }}
  {{- else }}
  password: {{ randAlphaNum 20 | b64enc }}
  {{- end }}
`)},
		"configmap.yaml": {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-app\ndata:\n  value: {{ .Values.value | quote }}\n")},
	}
	startGadgetKind(t, def)
	ns := newGadgetNamespace(t)
	createGadget(t, ns, "g", testv1alpha1.GadgetSpec{Value: "a"})
	waitGadgetValue(t, ns, "a")
	before := readAuth(t, ns)["password"]
	setGadgetValue(t, ns, "b")
	waitGadgetValue(t, ns, "b")
	if after := readAuth(t, ns)["password"]; after != before || len(after) != 20 {
		t.Errorf("the password %q became %q", before, after)
	}
}
