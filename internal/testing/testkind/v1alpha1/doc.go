// Package v1alpha1 is the test.stencil.dev/v1alpha1 API: the Widget and
// Gadget test kinds.
//
// +kubebuilder:object:generate=true
// +groupName=test.stencil.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the API's group and version.
	GroupVersion  = schema.GroupVersion{Group: "test.stencil.dev", Version: "v1alpha1"}
	schemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &Widget{}, &WidgetList{}, &Gadget{}, &GadgetList{})
		metav1.AddToGroupVersion(s, GroupVersion)
		return nil
	})
	// AddToScheme adds the API's types to a scheme.
	AddToScheme = schemeBuilder.AddToScheme
)
