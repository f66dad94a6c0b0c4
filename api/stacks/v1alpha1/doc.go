// Package v1alpha1 is the stacks.stencil.dev/v1alpha1 API: the AppStack kind.
//
// +kubebuilder:object:generate=true
// +groupName=stacks.stencil.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the API's group and version.
	GroupVersion  = schema.GroupVersion{Group: "stacks.stencil.dev", Version: "v1alpha1"}
	schemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &AppStack{}, &AppStackList{})
		metav1.AddToGroupVersion(s, GroupVersion)
		return nil
	})
	// AddToScheme adds the API's types to a scheme.
	AddToScheme = schemeBuilder.AddToScheme
)
