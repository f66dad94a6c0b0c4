package v1alpha1

import (
	"encoding/json"

	"k8s.io/apimachinery/pkg/runtime"
)

// Values is the spec of a kind made from a Helm chart (`stencil import
// chart`): the chart's values, free-form, as a release's values are. Its
// templates read them as .Values, merged over the chart's values.yaml;
// `stencil manifests` writes the schema of the chart's values (from its
// values.schema.json, else inferred from values.yaml, with its values as
// defaults) into the kind's CRD.
//
// +kubebuilder:validation:Type=object
// +kubebuilder:pruning:PreserveUnknownFields
// +kubebuilder:object:generate=false
type Values struct {
	Object map[string]any `json:"-"`
}

// DriftPolicy is the spec's driftPolicy (Correct when unset): stencil's one
// field beside the chart's values.
func (v Values) DriftPolicy() DriftPolicy {
	p, _ := v.Object["driftPolicy"].(string)
	return DriftPolicy(p).OrDefault()
}

// MarshalJSON writes the values as a JSON object.
func (v Values) MarshalJSON() ([]byte, error) {
	if v.Object == nil {
		return []byte("{}"), nil
	}
	return json.Marshal(v.Object)
}

// UnmarshalJSON reads a JSON object (null: none).
func (v *Values) UnmarshalJSON(data []byte) error {
	v.Object = nil
	return json.Unmarshal(data, &v.Object)
}

// DeepCopyInto copies v into out.
func (v *Values) DeepCopyInto(out *Values) {
	out.Object = runtime.DeepCopyJSON(v.Object)
}

// DeepCopy copies v.
func (v *Values) DeepCopy() *Values {
	if v == nil {
		return nil
	}
	out := new(Values)
	v.DeepCopyInto(out)
	return out
}
