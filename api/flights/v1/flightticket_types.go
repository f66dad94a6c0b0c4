package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// FlightTicketSpec is the desired state of a FlightTicket.
// +kubebuilder:validation:XValidation:rule="self.from != self.to",message="spec.to must differ from spec.from"
type FlightTicketSpec struct {
	// From is the departure city.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=100
	From string `json:"from"`
	// To is the destination city.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=100
	To string `json:"to"`
	// Number of tickets.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	Number int32 `json:"number"`
	// DriftPolicy says what stencil does when another manager changes a
	// field that the templates set: Correct (default) or Report.
	// +optional
	DriftPolicy v1alpha1.DriftPolicy `json:"driftPolicy,omitempty"`
}

// FlightTicketStatus is the observed state of a FlightTicket: stencil's shared status and
// the fields that the kind's status template fills in.
type FlightTicketStatus struct {
	v1alpha1.Status `json:",inline"`
	// Booking names the ConfigMap that holds the booking.
	// +optional
	Booking string `json:"booking,omitempty"`
}

// FlightTicket is a stencil kind; its resources are rendered from templates/flightticket.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories={stencil},shortName=ft
// +kubebuilder:printcolumn:name="From",type=string,JSONPath=`.spec.from`
// +kubebuilder:printcolumn:name="To",type=string,JSONPath=`.spec.to`
// +kubebuilder:printcolumn:name="Number",type=integer,JSONPath=`.spec.number`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Drifted",type=string,JSONPath=`.status.conditions[?(@.type=="Drifted")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Shard",type=string,priority=1,JSONPath=`.metadata.labels.stencil\.dev/claimed-by`,description="The shard that reconciles it (stencil --shard), when sharded"
type FlightTicket struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   FlightTicketSpec   `json:"spec"`
	Status FlightTicketStatus `json:"status,omitempty"`
}

// FlightTicketList is a list of FlightTicket resources.
// +kubebuilder:object:root=true
type FlightTicketList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FlightTicket `json:"items"`
}

// StencilStatus implements [v1alpha1.Object].
func (o *FlightTicket) StencilStatus() *v1alpha1.Status { return &o.Status.Status }

// StencilDriftPolicy implements [v1alpha1.Object].
func (o *FlightTicket) StencilDriftPolicy() v1alpha1.DriftPolicy {
	return o.Spec.DriftPolicy.OrDefault()
}
