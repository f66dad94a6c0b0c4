package engine

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// ObjectID is an object's identity, whatever the version of its type: its
// group, kind, namespace and name. Claims, conflicts, the objects waited
// for, the ones a prune keeps and ApplyOutcome.Live name objects by it.
type ObjectID struct {
	Group, Kind, Namespace, Name string
}

// NewID is the ObjectID of the object of type gvk named name in namespace.
func NewID(gvk schema.GroupVersionKind, namespace, name string) ObjectID {
	return ObjectID{Group: gvk.Group, Kind: gvk.Kind, Namespace: namespace, Name: name}
}

// IDOf is o's ObjectID.
func IDOf(o *unstructured.Unstructured) ObjectID {
	return NewID(o.GroupVersionKind(), o.GetNamespace(), o.GetName())
}

// String is the id as group/kind/namespace/name.
func (id ObjectID) String() string {
	return id.Group + "/" + id.Kind + "/" + id.Namespace + "/" + id.Name
}

// ObjectKey is an object's identity for the records the engine keeps of it
// (its baseline, its health, a fight, its own writes): its ObjectID and the
// UID of the resource that owns it (its owner label), so that a resource
// deleted and created again under the same name starts afresh.
type ObjectKey struct {
	id    ObjectID
	owner string
}

// KeyOf is o's ObjectKey.
func KeyOf(o *unstructured.Unstructured) ObjectKey {
	return keyOf(o.GroupVersionKind(), o)
}

// keyOf is the ObjectKey of o, of type gvk (as a watch delivered it).
func keyOf(gvk schema.GroupVersionKind, o metav1.Object) ObjectKey {
	return ObjectKey{id: NewID(gvk, o.GetNamespace(), o.GetName()), owner: o.GetLabels()[v1alpha1.LabelOwnerUID]}
}
