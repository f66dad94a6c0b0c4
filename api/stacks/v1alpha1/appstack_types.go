package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// AppStackSpec is the desired state of an AppStack: an app with its own
// database. templates/appstack/ renders it as a graph: a generated password,
// the database, a migration Job per version, then the app.
type AppStackSpec struct {
	// Version of the app, the tag of its image. A new version runs its
	// database migration (a Job named after it) before the app changes.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=20
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Version string `json:"version"`
	// Image of the app, without a tag.
	// +kubebuilder:default="ghcr.io/example/app"
	// +kubebuilder:validation:MaxLength=200
	// +optional
	Image string `json:"image,omitempty"`
	// Replicas of the app.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=50
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// Settings names a ConfigMap in the AppStack's namespace whose data the
	// app gets as environment variables. stencil reads it and never owns
	// it; a change of it reaches the app. A ConfigMap's name: lower-case
	// letters, digits, '-' and '.'.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	Settings string `json:"settings,omitempty"`
	// DriftPolicy says what stencil does when another manager changes a
	// field that the templates set: Correct (default) or Report.
	// +optional
	DriftPolicy v1alpha1.DriftPolicy `json:"driftPolicy,omitempty"`
}

// AppStackStatus is the observed state of a AppStack: stencil's shared
// status, and any fields a status template (templates/appstack/_status.yaml)
// fills in.
type AppStackStatus struct {
	v1alpha1.Status `json:",inline"`
}

// AppStack is a stencil kind; its resources are rendered from
// templates/appstack, a graph. Its name names Services, so it is a DNS-1035
// label, short enough for the migration Job's name.
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$') && size(self.metadata.name) <= 30",message="metadata.name must be a DNS-1035 label of at most 30 characters, as it names the AppStack's Services and Job: lower-case letters, digits and '-', starting with a letter"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories={stencil}
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.version`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Drifted",type=string,JSONPath=`.status.conditions[?(@.type=="Drifted")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Shard",type=string,priority=1,JSONPath=`.metadata.labels.stencil\.dev/claimed-by`,description="The shard that reconciles it (stencil --shard), when sharded"
type AppStack struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   AppStackSpec   `json:"spec"`
	Status AppStackStatus `json:"status,omitempty"`
}

// AppStackList is a list of AppStack resources.
// +kubebuilder:object:root=true
type AppStackList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AppStack `json:"items"`
}

// StencilStatus implements [v1alpha1.Object].
func (o *AppStack) StencilStatus() *v1alpha1.Status { return &o.Status.Status }

// StencilDriftPolicy implements [v1alpha1.Object].
func (o *AppStack) StencilDriftPolicy() v1alpha1.DriftPolicy { return o.Spec.DriftPolicy.OrDefault() }
