package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
	"github.com/stencil-operator/stencil/internal/testing/testutil/testop"
	"github.com/stencil-operator/stencil/render"
)

// startSecretGadgets runs, until the test ends, an operator for a Gadget
// kind that reads a Secret input (named by spec.settings) and copies its
// token into the label leak of a Secret (node copy), beside a ConfigMap
// (node plain).
func startSecretGadgets(t *testing.T) {
	t.Helper()
	cluster.Get(t)
	kind, err := render.Load(render.Definition{
		GroupVersionKind: testv1alpha1.GroupVersion.WithKind("Gadget"),
		New:              func() v1alpha1.Object { return &testv1alpha1.Gadget{} },
		Templates: fstest.MapFS{
			"_kind.yaml": {Data: []byte("owns: [{apiVersion: v1, kind: Secret}, {apiVersion: v1, kind: ConfigMap}]\n" +
				"inputs:\n  creds: {apiVersion: v1, kind: Secret, name: '{{ .Spec.Settings }}'}\n")},
			"copy.yaml": {Data: []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: {{ printf \"%s-copy\" .Name | quote }}\n" +
				"  labels: {leak: {{ input \"creds\" | need \"data.token\" | b64dec | quote }}}\n")},
			"plain.yaml": {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ printf \"%s-plain\" .Name | quote }}\n")},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	if err := testop.StartOperator(ctx, cluster.Get(t).Config, k8s.Scheme(), []*render.Kind{kind}, nil); err != nil {
		t.Fatal(err)
	}
}

// TestSecretDataWithheldFromRefusals: when the API server refuses an object
// that a node rendered from a Secret input's data, quoting the data (an
// invalid label value, a policy's message), neither the resource's status
// nor its events quote it; they name the node. The resource's other objects
// are applied.
func TestSecretDataWithheldFromRefusals(t *testing.T) {
	startSecretGadgets(t)
	tests := []struct {
		// name is one word: the namespace is named after the subtest.
		name string
		// token is the Secret input's token, which copy makes a label.
		token string
		// deny: a ValidatingAdmissionPolicy in the namespace refuses a
		// Secret with the label leak (403), quoting its value.
		deny bool
		// reason is Ready's.
		reason string
	}{
		{name: "invalid", token: "hunter2 is not a label value!", reason: v1alpha1.ReasonRejected},
		{name: "denied", token: "hunter2", deny: true, reason: v1alpha1.ReasonApplyFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := newGadgetNamespace(t)
			if tt.deny {
				denyLeaks(t, ns)
			}
			creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"}, Data: map[string][]byte{"token": []byte(tt.token)}}
			if err := k8s.Create(t.Context(), creds); err != nil {
				t.Fatal(err)
			}
			createGadget(t, ns, "s", testv1alpha1.GadgetSpec{Settings: "creds"})
			eventually(t, 30*time.Second, "the refusal told without the data", func() error {
				return gadgetCondition(t, ns, "s", v1alpha1.ConditionReady, metav1.ConditionFalse, tt.reason,
					`node "copy", which reads Secret data; its message is withheld`)
			})
			g := &testv1alpha1.Gadget{}
			if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "s"}, g); err != nil {
				t.Fatal(err)
			}
			t.Logf("Ready: %s", meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionReady).Message)
			for _, c := range g.Status.Conditions {
				if strings.Contains(c.Message, "hunter2") {
					t.Fatalf("condition %s quotes the Secret's data: %s", c.Type, c.Message)
				}
			}
			eventually(t, 30*time.Second, "the event of the refusal, without the data", func() error {
				return refusalEvent(t, ns, tt.reason)
			})
			if !exists(t, &corev1.ConfigMap{}, ns, "s-plain") {
				t.Fatal("ConfigMap s-plain not applied: a refused object leaves the others applied")
			}
		})
	}
}

// refusalEvent is nil when ns holds an event of reason, and no event of ns
// quotes the Secret's data.
func refusalEvent(t *testing.T, ns, reason string) error {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := k8s.List(t.Context(), list, client.InNamespace(ns)); err != nil {
		return err
	}
	found := false
	for _, e := range list.Items {
		if strings.Contains(e.Note, "hunter2") {
			t.Fatalf("event %s quotes the Secret's data: %s", e.Reason, e.Note)
		}
		found = found || e.Reason == reason
	}
	if !found {
		return fmt.Errorf("no %s event among %d", reason, len(list.Items))
	}
	return nil
}

// denyLeaks makes the API server refuse, in ns, a Secret with the label
// leak, with a message that quotes its value, until the test ends; it
// returns once the refusal is in force.
func denyLeaks(t *testing.T, ns string) {
	t.Helper()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-leaks-" + ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: new(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"secrets"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression:        "!has(object.metadata.labels) || !('leak' in object.metadata.labels)",
				MessageExpression: "'the label leak is ' + object.metadata.labels['leak']",
				Reason:            new(metav1.StatusReasonForbidden),
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}},
		},
	}
	for _, o := range []client.Object{policy, binding} {
		if err := k8s.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.WithoutCancel(t.Context()), o) })
	}
	eventually(t, 30*time.Second, "the policy in force", func() error {
		probe := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe", Labels: map[string]string{"leak": "probe"}}}
		err := k8s.Create(t.Context(), probe, client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "the label leak is probe") {
			return errors.Join(errors.New("a leaking Secret is not refused yet"), err)
		}
		return nil
	})
}
