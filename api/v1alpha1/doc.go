// Package v1alpha1 holds the types that every stencil kind shares: the drift
// policy in its spec and the status shape (conditions, inventory, drift), with
// the condition types and reasons a user sees. It imports only the standard
// library and apimachinery.
//
// +kubebuilder:object:generate=true
package v1alpha1
