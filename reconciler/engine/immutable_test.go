package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestImmutableErrorSaysWhatToDo(t *testing.T) {
	pvc := &unstructured.Unstructured{}
	pvc.SetAPIVersion("v1")
	pvc.SetKind("PersistentVolumeClaim")
	pvc.SetNamespace("ns")
	pvc.SetName("data")
	deployment := pvc.DeepCopy()
	deployment.SetAPIVersion("apps/v1")
	deployment.SetKind("Deployment")
	if !holdsData(pvc) || holdsData(deployment) {
		t.Errorf("holdsData: PersistentVolumeClaim %v, Deployment %v; want true, false", holdsData(pvc), holdsData(deployment))
	}
	for _, tt := range []struct {
		e    immutableError
		want []string
	}{
		{immutableError{object: deployment, fields: []string{"spec.selector"}}, []string{`Deployment "data" in namespace "ns"`, "spec.selector", "stencil.dev/force: enabled", "kubectl delete deployment.apps data -n ns"}},
		{immutableError{object: pvc, fields: []string{"spec"}, holdsData: true}, []string{"holds data", "stencil.dev/force: enabled-data-loss", "kubectl delete persistentvolumeclaim data -n ns"}},
	} {
		for _, want := range tt.want {
			if !strings.Contains(tt.e.Error(), want) {
				t.Errorf("%q does not contain %q", tt.e.Error(), want)
			}
		}
	}
}

// TestHoldsDataStatefulSet: a StatefulSet holds data only when its claims
// go with it; with no policy, the API server's default (Retain) keeps them.
func TestHoldsDataStatefulSet(t *testing.T) {
	for policy, want := range map[string]bool{"Delete": true, "Retain": false, "": false} {
		sts := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "StatefulSet", "spec": map[string]any{}}}
		if policy != "" {
			sts.Object["spec"] = map[string]any{"persistentVolumeClaimRetentionPolicy": map[string]any{"whenDeleted": policy}}
		}
		if got := holdsData(sts); got != want {
			t.Errorf("holdsData, whenDeleted %q: %v, want %v", policy, got, want)
		}
	}
}

func TestImmutableFields(t *testing.T) {
	deployment := schema.GroupKind{Group: "apps", Kind: "Deployment"}
	tests := []struct {
		name string
		err  error
		want []string
	}{
		{"selector changed", apierrors.NewInvalid(deployment, "web", field.ErrorList{
			field.Invalid(field.NewPath("spec", "selector"), "x", apimachineryvalidation.FieldImmutableErrorMsg),
		}), []string{"spec.selector"}},
		{"wrapped, two fields", fmt.Errorf("applying Deployment ns/web: %w", apierrors.NewInvalid(deployment, "web", field.ErrorList{
			field.Invalid(field.NewPath("spec", "template"), "x", apimachineryvalidation.FieldImmutableErrorMsg),
			field.Invalid(field.NewPath("spec", "selector"), "x", apimachineryvalidation.FieldImmutableErrorMsg),
		})), []string{"spec.template", "spec.selector"}},
		{"a ConfigMap's wording", apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "c", field.ErrorList{
			field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"),
		}), []string{"data"}},
		{"a Service's clusterIP", apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "s", field.ErrorList{
			field.Invalid(field.NewPath("spec", "clusterIPs").Index(0), "10.0.0.2", "may not change once set"),
		}), []string{"spec.clusterIPs[0]"}},
		{"a StatefulSet's spec", apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "StatefulSet"}, "s", field.ErrorList{
			field.Forbidden(field.NewPath("spec"), "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template' are forbidden"),
		}), []string{"spec"}},
		{"an immutable field and another refusal", apierrors.NewInvalid(deployment, "web", field.ErrorList{
			field.Invalid(field.NewPath("spec", "selector"), "x", apimachineryvalidation.FieldImmutableErrorMsg),
			field.Required(field.NewPath("spec", "template"), ""),
		}), nil},
		{"another invalid value", apierrors.NewInvalid(deployment, "web", field.ErrorList{
			field.Invalid(field.NewPath("spec", "replicas"), -1, "must be greater than or equal to 0"),
		}), nil},
		{"not an API error", errors.New("connection refused"), nil},
		{"none", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := immutableFields(tt.err); !slices.Equal(got, tt.want) {
				t.Errorf("immutableFields = %v, want %v", got, tt.want)
			}
		})
	}
}

// rejected tells the refusals no retry of the same render fixes from the
// others.
func TestRejected(t *testing.T) {
	gr := schema.GroupResource{Resource: "services"}
	invalid := func(msg string) error {
		return apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "web", field.ErrorList{field.Invalid(field.NewPath("spec", "ports"), 30080, msg)})
	}
	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"none", nil, false},
		{"invalid", invalid("must be between 1 and 65535"), true},
		{"too large", apierrors.NewRequestEntityTooLargeError("limit is 3145728"), true},
		{"port already allocated", invalid("provided port is already allocated"), false},
		{"webhook denial", apierrors.NewBadRequest("admission webhook \"x\" denied the request"), false},
		{"forbidden", apierrors.NewForbidden(gr, "web", errors.New("no")), false},
		{"conflict", apierrors.NewConflict(gr, "web", errors.New("changed")), false},
	} {
		if got := rejected(tt.err); got != tt.want {
			t.Errorf("%s: rejected = %v, want %v", tt.name, got, tt.want)
		}
	}
}
