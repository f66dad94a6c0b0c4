// Package v1 is the cache.example.com/v1 API: the Memcached kind, its hub
// and storage version. v1alpha1 is still served; templates/memcached
// converts between the two (_from-v1alpha1.yaml, _to-v1alpha1.yaml), see
// docs/evolve-api.md.
//
// +kubebuilder:object:generate=true
// +groupName=cache.example.com
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the API's group and version.
	GroupVersion  = schema.GroupVersion{Group: "cache.example.com", Version: "v1"}
	schemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &Memcached{}, &MemcachedList{})
		metav1.AddToGroupVersion(s, GroupVersion)
		return nil
	})
	// AddToScheme adds the API's types to a scheme.
	AddToScheme = schemeBuilder.AddToScheme
)
