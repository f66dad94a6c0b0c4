package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// GuestbookSpec is the desired state of a Guestbook.
type GuestbookSpec struct {
	// Size is the number of guestbook pods.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	Size int32 `json:"size"`
	// ConfigMapName names the guestbook's ConfigMap.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:XValidation:rule="!format.dns1123Label().validate(self).hasValue()",message="configMapName must be lower-case letters, digits and '-'"
	ConfigMapName string `json:"configMapName"`
	// Alias is the kind of entry the guestbook records.
	// +kubebuilder:validation:Enum=Phone;Address;Name
	// +optional
	Alias string `json:"alias,omitempty"`
	// DriftPolicy says what stencil does when another manager changes a
	// field that the templates set: Correct (default) or Report.
	// +optional
	DriftPolicy v1alpha1.DriftPolicy `json:"driftPolicy,omitempty"`
}

// GuestbookStatus is the observed state of a Guestbook: stencil's shared status and
// the fields that the kind's status template fills in.
type GuestbookStatus struct {
	v1alpha1.Status `json:",inline"`
	// ReadyReplicas of the guestbook Deployment.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
}

// Guestbook is a stencil kind; its resources are rendered from templates/guestbook.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories={stencil}
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=`.spec.size`
// +kubebuilder:printcolumn:name="ConfigMap",type=string,JSONPath=`.spec.configMapName`
// +kubebuilder:printcolumn:name="Alias",type=string,JSONPath=`.spec.alias`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Drifted",type=string,JSONPath=`.status.conditions[?(@.type=="Drifted")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Shard",type=string,priority=1,JSONPath=`.metadata.labels.stencil\.dev/claimed-by`,description="The shard that reconciles it (stencil --shard), when sharded"
type Guestbook struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   GuestbookSpec   `json:"spec"`
	Status GuestbookStatus `json:"status,omitempty"`
}

// GuestbookList is a list of Guestbook resources.
// +kubebuilder:object:root=true
type GuestbookList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Guestbook `json:"items"`
}

// StencilStatus implements [v1alpha1.Object].
func (o *Guestbook) StencilStatus() *v1alpha1.Status { return &o.Status.Status }

// StencilDriftPolicy implements [v1alpha1.Object].
func (o *Guestbook) StencilDriftPolicy() v1alpha1.DriftPolicy { return o.Spec.DriftPolicy.OrDefault() }
