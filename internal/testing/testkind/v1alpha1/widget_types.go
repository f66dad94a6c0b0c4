package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// WidgetSpec drives the Widget templates.
type WidgetSpec struct {
	// Message goes into the ConfigMap.
	Message string `json:"message"`
	// Replicas of the Deployment.
	// +kubebuilder:validation:Minimum=0
	Replicas int32 `json:"replicas"`
	// Service turns the Service template on.
	// +optional
	Service bool `json:"service,omitempty"`
	// ConfigName names the ConfigMap; empty means "<name>-config". Two
	// Widgets with one ConfigName render the same object.
	// +optional
	ConfigName string `json:"configName,omitempty"`
	// Extra, when set, adds data.extra to the ConfigMap.
	// +optional
	Extra string `json:"extra,omitempty"`
	// CPU request of the container, written as given (e.g. "0.5").
	// +optional
	CPU string `json:"cpu,omitempty"`
	// ClusterRole turns on a cluster-scoped ClusterRole, which no
	// ownerReference can clean up.
	// +optional
	ClusterRole bool `json:"clusterRole,omitempty"`
	// Track, when set, joins the Deployment's selector as label "track":
	// changing it changes an immutable field.
	// +optional
	Track string `json:"track,omitempty"`
	// HandOverReplicas hands the Deployment's replicas over to the first
	// other manager that takes them (stencil.dev/hand-over).
	// +optional
	HandOverReplicas bool `json:"handOverReplicas,omitempty"`
	// KeepConfig keeps the ConfigMap on prune and on the Widget's deletion
	// (stencil.dev/prune: disabled).
	// +optional
	KeepConfig bool `json:"keepConfig,omitempty"`
	// CreateOnlyConfig creates the ConfigMap once and never updates it
	// (stencil.dev/ssa: IfNotPresent).
	// +optional
	CreateOnlyConfig bool `json:"createOnlyConfig,omitempty"`
	// RecreateDeployment lets stencil delete and create the Deployment anew
	// when a render changes an immutable field (stencil.dev/force).
	// +optional
	RecreateDeployment bool `json:"recreateDeployment,omitempty"`
	// Unschedulable gives the Deployment's pods a node selector no node
	// matches, so the Deployment never becomes available.
	// +optional
	Unschedulable bool `json:"unschedulable,omitempty"`
	// ProgressDeadlineSeconds is the Deployment's progress deadline.
	// +optional
	ProgressDeadlineSeconds int32 `json:"progressDeadlineSeconds,omitempty"`
	// Fail makes a template call fail.
	// +optional
	Fail bool `json:"fail,omitempty"`
	// DriftPolicy: Correct (default) or Report.
	// +optional
	DriftPolicy v1alpha1.DriftPolicy `json:"driftPolicy,omitempty"`
	// StatefulSet, when set, turns on a StatefulSet of one replica with a
	// claim per replica, which stencil may recreate (stencil.dev/force:
	// enabled).
	// +optional
	StatefulSet *WidgetStatefulSet `json:"statefulSet,omitempty"`
}

// WidgetStatefulSet drives the StatefulSet template.
type WidgetStatefulSet struct {
	// Storage each claim asks for (in volumeClaimTemplates, which cannot
	// change once set).
	Storage string `json:"storage"`
	// WhenDeleted: whether the claims go with the StatefulSet when it is
	// deleted (persistentVolumeClaimRetentionPolicy.whenDeleted).
	// +kubebuilder:validation:Enum=Retain;Delete
	WhenDeleted string `json:"whenDeleted"`
}

// WidgetStatus is stencil's shared status.
type WidgetStatus struct {
	v1alpha1.Status `json:",inline"`
}

// Widget is the test kind.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Drifted",type=string,JSONPath=`.status.conditions[?(@.type=="Drifted")].status`
// +kubebuilder:printcolumn:name="Shard",type=string,priority=1,JSONPath=`.metadata.labels.stencil\.dev/claimed-by`,description="The shard that reconciles it (stencil --shard), when sharded"
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WidgetSpec   `json:"spec"`
	Status WidgetStatus `json:"status,omitempty"`
}

// WidgetList is a list of Widgets.
// +kubebuilder:object:root=true
type WidgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Widget `json:"items"`
}

// StencilStatus implements [v1alpha1.Object].
func (w *Widget) StencilStatus() *v1alpha1.Status { return &w.Status.Status }

// StencilDriftPolicy implements [v1alpha1.Object].
func (w *Widget) StencilDriftPolicy() v1alpha1.DriftPolicy {
	if w.Spec.DriftPolicy == "" {
		return v1alpha1.DriftCorrect
	}
	return w.Spec.DriftPolicy
}
