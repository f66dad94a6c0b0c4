// Package v1alpha1 is the cache.example.com/v1alpha1 API: the Memcached
// kind's first version, still served; v1 is the hub and storage version,
// and templates/memcached converts between them.
//
// +kubebuilder:object:generate=true
// +groupName=cache.example.com
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the API's group and version.
	GroupVersion  = schema.GroupVersion{Group: "cache.example.com", Version: "v1alpha1"}
	schemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &Memcached{}, &MemcachedList{})
		metav1.AddToGroupVersion(s, GroupVersion)
		return nil
	})
	// AddToScheme adds the API's types to a scheme.
	AddToScheme = schemeBuilder.AddToScheme
)
