package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// MyWebSpec is the desired state of a MyWeb.
type MyWebSpec struct {
	// Image of the web server (nginx or compatible), one token such as
	// "nginx" or "nginx:1.27".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:Pattern=`^[^\s]+$`
	Image string `json:"image"`
	// NodePortNumber is the Service's node port.
	// +kubebuilder:validation:Minimum=30000
	// +kubebuilder:validation:Maximum=32767
	NodePortNumber int32 `json:"nodePortNumber"`
	// PageContentHtml is served as index.html.
	// +kubebuilder:validation:MaxLength=65536
	// +optional
	PageContentHtml string `json:"pageContentHtml,omitempty"`
	// DriftPolicy says what stencil does when another manager changes a
	// field that the templates set: Correct (default) or Report.
	// +optional
	DriftPolicy v1alpha1.DriftPolicy `json:"driftPolicy,omitempty"`
}

// MyWebStatus is the observed state of a MyWeb: stencil's shared status and
// the fields that the kind's status template fills in.
type MyWebStatus struct {
	v1alpha1.Status `json:",inline"`
	// Completed is true once the web server Deployment is available.
	// +optional
	Completed bool `json:"completed,omitempty"`
}

// MyWeb is a stencil kind; its resources are rendered from templates/myweb.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories={all,stencil},shortName=web
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`
// +kubebuilder:printcolumn:name="NodePort",type=integer,JSONPath=`.spec.nodePortNumber`
// +kubebuilder:printcolumn:name="Completed",type=boolean,JSONPath=`.status.completed`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Drifted",type=string,JSONPath=`.status.conditions[?(@.type=="Drifted")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Shard",type=string,priority=1,JSONPath=`.metadata.labels.stencil\.dev/claimed-by`,description="The shard that reconciles it (stencil --shard), when sharded"
// A MyWeb's name is its Service's, which must be a DNS-1035 label (found by
// the kinds' property test: a MyWeb named "123" or "a.b" rendered a Service
// the API server refuses).
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$') && size(self.metadata.name) <= 63",message="metadata.name must be a DNS-1035 label, as it names the MyWeb's Service: lower-case letters, digits and '-', starting with a letter, at most 63 characters"
type MyWeb struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MyWebSpec   `json:"spec"`
	Status MyWebStatus `json:"status,omitempty"`
}

// MyWebList is a list of MyWeb resources.
// +kubebuilder:object:root=true
type MyWebList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MyWeb `json:"items"`
}

// StencilStatus implements [v1alpha1.Object].
func (o *MyWeb) StencilStatus() *v1alpha1.Status { return &o.Status.Status }

// StencilDriftPolicy implements [v1alpha1.Object].
func (o *MyWeb) StencilDriftPolicy() v1alpha1.DriftPolicy { return o.Spec.DriftPolicy.OrDefault() }
