package v1alpha1

import (
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// OwnerAnnotation is the value of [AnnotationOwner] for the custom
// resource of kind gvk at namespace/name.
func OwnerAnnotation(gvk schema.GroupVersionKind, namespace, name string) string {
	return gvk.Kind + "." + gvk.Group + "/" + namespace + "/" + name
}

// ParseOwnerAnnotation splits an [OwnerAnnotation] value into the owner's
// kind, group, namespace and name.
func ParseOwnerAnnotation(value string) (schema.GroupKind, types.NamespacedName, bool) {
	parts := strings.SplitN(value, "/", 3)
	if len(parts) != 3 {
		return schema.GroupKind{}, types.NamespacedName{}, false
	}
	kind, group, _ := strings.Cut(parts[0], ".")
	return schema.GroupKind{Group: group, Kind: kind}, types.NamespacedName{Namespace: parts[1], Name: parts[2]}, true
}
