package reconciler

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

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
		{"wrapped, among other causes", fmt.Errorf("applying Deployment ns/web: %w", apierrors.NewInvalid(deployment, "web", field.ErrorList{
			field.Required(field.NewPath("spec", "template"), ""),
			field.Invalid(field.NewPath("spec", "selector"), "x", apimachineryvalidation.FieldImmutableErrorMsg),
		})), []string{"spec.selector"}},
		{"a ConfigMap's wording", apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "c", field.ErrorList{
			field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"),
		}), []string{"data"}},
		{"a Service's clusterIP", apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "s", field.ErrorList{
			field.Invalid(field.NewPath("spec", "clusterIPs").Index(0), "10.0.0.2", "may not change once set"),
		}), []string{"spec.clusterIPs[0]"}},
		{"a StatefulSet's spec", apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "StatefulSet"}, "s", field.ErrorList{
			field.Forbidden(field.NewPath("spec"), "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template' are forbidden"),
		}), []string{"spec"}},
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
