package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// MemcachedSpec is the desired state of a Memcached.
type MemcachedSpec struct {
	// Size is the number of memcached pods, as the operator-sdk tutorial
	// names it: the name every version keeps, so that clients that write
	// it without naming a version (kubectl patch memcached) still work.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Size int32 `json:"size"`
	// Autoscaling hands the Deployment's replicas over to an autoscaler
	// (v1alpha1: autoscaled).
	// +optional
	Autoscaling *Autoscaling `json:"autoscaling,omitempty"`
	// DriftPolicy says what stencil does when another manager changes a
	// field that the templates set: Correct (default) or Report.
	// +optional
	DriftPolicy v1alpha1.DriftPolicy `json:"driftPolicy,omitempty"`
}

// Autoscaling says whether an autoscaler scales the memcached pods.
type Autoscaling struct {
	// Enabled: a HorizontalPodAutoscaler takes replicas over; replicas
	// sets the first count, and once the autoscaler scales, stencil
	// leaves the count to it.
	Enabled bool `json:"enabled"`
}

// MemcachedStatus is the observed state of a Memcached: stencil's shared status and
// the fields that the kind's status template fills in.
type MemcachedStatus struct {
	v1alpha1.Status `json:",inline"`
	// Nodes are the names of the memcached pods.
	// +optional
	Nodes []string `json:"nodes,omitempty"`
}

// Memcached is a stencil kind; its resources are rendered from templates/memcached.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories={stencil}
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=`.spec.size`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Drifted",type=string,JSONPath=`.status.conditions[?(@.type=="Drifted")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Shard",type=string,priority=1,JSONPath=`.metadata.labels.stencil\.dev/claimed-by`,description="The shard that reconciles it (stencil --shard), when sharded"
type Memcached struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MemcachedSpec   `json:"spec"`
	Status MemcachedStatus `json:"status,omitempty"`
}

// MemcachedList is a list of Memcached resources.
// +kubebuilder:object:root=true
type MemcachedList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Memcached `json:"items"`
}

// StencilStatus implements [v1alpha1.Object].
func (o *Memcached) StencilStatus() *v1alpha1.Status { return &o.Status.Status }

// StencilDriftPolicy implements [v1alpha1.Object].
func (o *Memcached) StencilDriftPolicy() v1alpha1.DriftPolicy { return o.Spec.DriftPolicy.OrDefault() }
