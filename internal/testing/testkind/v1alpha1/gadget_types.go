package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// GadgetSpec drives the Gadget test kind, a graph (templates/gadget): a
// generated token, a gate a test opens by annotating it, a value a later
// node needs, and a required input.
type GadgetSpec struct {
	// Value goes into the value ConfigMap's data.value; empty, it has none,
	// and the copy node waits for it.
	// +optional
	Value string `json:"value,omitempty"`
	// Settings names the ConfigMap the settings node reads (required: the
	// node waits until it exists).
	// +optional
	Settings string `json:"settings,omitempty"`
	// DriftPolicy: Correct (default) or Report.
	// +optional
	DriftPolicy v1alpha1.DriftPolicy `json:"driftPolicy,omitempty"`
}

// GadgetStatus is stencil's shared status.
type GadgetStatus struct {
	v1alpha1.Status `json:",inline"`
}

// Gadget is a graph test kind.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
type Gadget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   GadgetSpec   `json:"spec,omitempty"`
	Status GadgetStatus `json:"status,omitempty"`
}

// GadgetList is a list of Gadgets.
// +kubebuilder:object:root=true
type GadgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Gadget `json:"items"`
}

// StencilStatus implements [v1alpha1.Object].
func (o *Gadget) StencilStatus() *v1alpha1.Status { return &o.Status.Status }

// StencilDriftPolicy implements [v1alpha1.Object].
func (o *Gadget) StencilDriftPolicy() v1alpha1.DriftPolicy {
	if o.Spec.DriftPolicy == "" {
		return v1alpha1.DriftCorrect
	}
	return o.Spec.DriftPolicy
}
