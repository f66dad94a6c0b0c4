package reconciler

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
	"github.com/stencil-operator/stencil/render"
)

// TestWithholdSecretData: what the API server says of an object rendered
// from a Secret input's data is withheld, and so is what it says of no
// object in particular while such an object is applied; what it says of
// another object stays. A withheld error keeps its code, reason and cause
// types (the namespace's termination still reads as such).
func TestWithholdSecretData(t *testing.T) {
	kind, err := render.Load(render.Definition{
		GroupVersionKind: testv1alpha1.GroupVersion.WithKind("Gadget"),
		New:              func() v1alpha1.Object { return &testv1alpha1.Gadget{} },
		Templates: fstest.MapFS{
			"_kind.yaml": {Data: []byte("owns: [{apiVersion: v1, kind: Secret}, {apiVersion: v1, kind: ConfigMap}]\n" +
				"inputs:\n  creds: {apiVersion: v1, kind: Secret, name: '{{ .Spec.Settings }}'}\n")},
			"copy.yaml":  {Data: []byte("apiVersion: v1\nkind: Secret\nmetadata: {name: copy}\ndata: {token: {{ input \"creds\" | need \"data.token\" | quote }}}\n")},
			"plain.yaml": {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plain}\n")},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	gadget := &testv1alpha1.Gadget{ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: "ns", UID: "uid-1"}, Spec: testv1alpha1.GadgetSpec{Settings: "creds"}}
	plan, err := kind.RenderGraph(gadget, render.GraphInput{Live: render.Objects{{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "creds", "namespace": "ns"}, "data": map[string]any{"token": "aHVudGVyMg=="}}}}})
	if err != nil || len(plan.Objects) != 2 {
		t.Fatalf("render: %v, %d objects", err, len(plan.Objects))
	}
	const value = "hunter2"
	invalid := func(kind, name string) error {
		return fmt.Errorf("applying %s ns/%s: %w", kind, name, apierrors.NewInvalid(schema.GroupKind{Kind: kind}, name,
			field.ErrorList{field.Invalid(field.NewPath("metadata", "labels"), value, "a label value must be ...")}))
	}
	terminating := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden,
		Message: "secrets \"copy\" is forbidden: unable to create new content in namespace ns because it is being terminated (" + value + ")",
		Details: &metav1.StatusDetails{Name: "copy", Kind: "secrets", Causes: []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Message: "namespace ns is being terminated"}}}}}
	tests := []struct {
		name string
		// err is what the apply said.
		err error
		// withheld: the message is replaced.
		withheld bool
		// check, when set, must hold of the error that is left.
		check func(error) bool
	}{
		{name: "an invalid object of the node that holds Secret data", err: invalid("Secret", "copy"), withheld: true, check: apierrors.IsInvalid},
		{name: "an invalid object of another node", err: invalid("ConfigMap", "plain")},
		{name: "a request too large: no object named", err: fmt.Errorf("applying Secret ns/copy: %w", apierrors.NewRequestEntityTooLargeError("limit is 3145728")), withheld: true,
			check: apierrors.IsRequestEntityTooLargeError},
		{name: "not an API status", err: errors.New("encoding Secret ns/copy: " + value), withheld: true},
		{name: "a terminating namespace stays one", err: terminating, withheld: true,
			check: func(err error) bool { return apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) }},
	}
	r := &Reconciler{}
	r.current.Store(kind)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := errors.Join(r.withholdSecretData(plan.Objects, []error{tt.err})...)
			msg := got.Error()
			if withheld := strings.Contains(msg, "its message is withheld"); withheld != tt.withheld {
				t.Fatalf("%q: withheld %v, want %v", msg, withheld, tt.withheld)
			}
			if tt.withheld && (strings.Contains(msg, value) || !strings.Contains(msg, `node "copy"`)) {
				t.Fatalf("%q: a withheld message names the node, never the data", msg)
			}
			if tt.check != nil && !tt.check(got) {
				t.Fatalf("%q: lost what the reconciler decides on (its code, reason or causes)", msg)
			}
		})
	}
}

// TestWithholdOwnSecretData: the graph's own Secrets are Secret data too (a
// generated password, or one a person chose in a Secret the node adopted):
// what the API server says of an object of a node that read one (conn) is
// withheld, naming that node, and so is what it says of no object in
// particular once such a node rendered; what it says of the Secret's own
// node (pw, which read no Secret) or of another node stays.
func TestWithholdOwnSecretData(t *testing.T) {
	kind, err := render.Load(render.Definition{
		GroupVersionKind: testv1alpha1.GroupVersion.WithKind("Gadget"),
		New:              func() v1alpha1.Object { return &testv1alpha1.Gadget{} },
		Templates: fstest.MapFS{
			"_kind.yaml": {Data: []byte("owns: [{apiVersion: v1, kind: Secret}, {apiVersion: v1, kind: ConfigMap}]\ngraph:\n  pw: {createOnly: true}\n")},
			"pw.yaml":    {Data: []byte("apiVersion: v1\nkind: Secret\nmetadata: {name: pw}\ndata: {password: {{ generate 16 | b64enc | quote }}}\n")},
			"conn.yaml":  {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: conn\n  labels: {leak: {{ object \"pw\" | need \"data.password\" | b64dec | quote }}}\n")},
			"plain.yaml": {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plain}\n")},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	const value = "hunter2"
	gadget := &testv1alpha1.Gadget{ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: "ns", UID: "uid-1"}}
	first, err := kind.RenderGraph(gadget, render.GraphInput{})
	if err != nil || len(first.Objects) != 2 {
		t.Fatalf("first render: %v, %d objects, want pw and plain", err, len(first.Objects))
	}
	pw := map[string]any{"apiVersion": "v1", "kind": "Secret", "data": map[string]any{"password": "aHVudGVyMg=="},
		"metadata": map[string]any{"name": "pw", "namespace": "ns", "labels": map[string]any{v1alpha1.LabelOwnerUID: "uid-1"}}}
	plan, err := kind.RenderGraph(gadget, render.GraphInput{Live: render.Objects{{Object: pw}}})
	if err != nil || len(plan.Objects) != 3 {
		t.Fatalf("render: %v, %d objects, want pw, conn and plain", err, len(plan.Objects))
	}
	invalid := func(kind, name string) error {
		return fmt.Errorf("applying %s ns/%s: %w", kind, name, apierrors.NewInvalid(schema.GroupKind{Kind: kind}, name,
			field.ErrorList{field.Invalid(field.NewPath("metadata", "labels"), value, "a label value must be ...")}))
	}
	tooLarge := fmt.Errorf("applying ConfigMap ns/conn: %w", apierrors.NewRequestEntityTooLargeError("limit is 3145728"))
	tests := []struct {
		name string
		// first: the apply is of the first render, which conn waits
		// out (else of the one where it rendered).
		first bool
		// err is what the apply said.
		err error
		// withheld: the message is replaced, naming node conn.
		withheld bool
	}{
		{name: "an invalid object of the node that read the Secret", err: invalid("ConfigMap", "conn"), withheld: true},
		{name: "an invalid object of the node that renders the Secret", err: invalid("Secret", "pw")},
		{name: "an invalid object of another node", err: invalid("ConfigMap", "plain")},
		{name: "no object named", err: tooLarge, withheld: true},
		{name: "no object named, while no node read the Secret", first: true, err: tooLarge},
	}
	r := &Reconciler{}
	r.current.Store(kind)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			desired := plan.Objects
			if tt.first {
				desired = first.Objects
			}
			got := errors.Join(r.withholdSecretData(desired, []error{tt.err})...)
			msg := got.Error()
			if withheld := strings.Contains(msg, "its message is withheld"); withheld != tt.withheld {
				t.Fatalf("%q: withheld %v, want %v", msg, withheld, tt.withheld)
			}
			if tt.withheld && (strings.Contains(msg, value) || !strings.Contains(msg, `node "conn", which reads Secret data`)) {
				t.Fatalf("%q: a withheld message names the node, never the data", msg)
			}
		})
	}
}
