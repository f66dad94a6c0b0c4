package engine

import (
	"context"
	"fmt"
	"maps"
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// CachedTypes says how the cache holds every type that some kind owns or
// observes, so that each type has one informer: whole objects when any
// kind's status template reads them or judges their health, else metadata
// only. Whole objects are
// typed when the scheme knows the type (smaller in memory, and sent as
// protobuf), else unstructured.
type CachedTypes struct {
	Whole map[schema.GroupVersionKind]bool
	// Trimmed are the types of Whole the cache holds trimmed ([Trim]),
	// by the kind that owns the objects.
	Trimmed TrimmedTypes
	Scheme  *runtime.Scheme
}

// TrimmedTypes are, by owner kind, the types of its objects the cache
// holds trimmed ([Trim]).
type TrimmedTypes map[schema.GroupKind]map[schema.GroupVersionKind]bool

// Trims reports whether the cache holds owner's objects of type gvk
// trimmed.
func (t TrimmedTypes) Trims(owner schema.GroupKind, gvk schema.GroupVersionKind) bool {
	return t[owner][gvk]
}

// Declared says whether some kind owns or observes gvk; if so, its
// informer is indexed by owner UID.
func (t CachedTypes) Declared(gvk schema.GroupVersionKind) bool {
	_, ok := t.Whole[gvk]
	return ok
}

// NewObject is an empty object of type gvk, of the Go type its informer
// holds. Types that no kind declares (left in an inventory) are read
// metadata-only.
func (t CachedTypes) NewObject(gvk schema.GroupVersionKind) client.Object {
	if t.Whole[gvk] {
		if obj, err := t.Scheme.New(gvk); err == nil {
			if typed, ok := obj.(client.Object); ok {
				typed.GetObjectKind().SetGroupVersionKind(gvk)
				return typed
			}
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		return u
	}
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	return m
}

// NewList is an empty list of type gvk, matching NewObject.
func (t CachedTypes) NewList(gvk schema.GroupVersionKind) client.ObjectList {
	listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
	if t.Whole[gvk] {
		if obj, err := t.Scheme.New(listGVK); err == nil {
			if typed, ok := obj.(client.ObjectList); ok {
				return typed
			}
		}
		u := &unstructured.UnstructuredList{}
		u.SetGroupVersionKind(listGVK)
		return u
	}
	m := &metav1.PartialObjectMetadataList{}
	m.SetGroupVersionKind(listGVK)
	return m
}

// Items are the objects of a list from NewList, with their type set.
func Items(list client.ObjectList, gvk schema.GroupVersionKind) ([]client.Object, error) {
	objs, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	out := make([]client.Object, 0, len(objs))
	for _, o := range objs {
		obj, ok := o.(client.Object)
		if !ok {
			return nil, fmt.Errorf("%T in a %s list is not an object", o, gvk.Kind)
		}
		obj.GetObjectKind().SetGroupVersionKind(gvk)
		out = append(out, obj)
	}
	return out, nil
}

// ObjectMap is obj as the maps that status templates read, without its
// managedFields: no template needs them, and they are most of the reflection
// cost of converting a typed object. obj is left as it was.
func ObjectMap(obj client.Object) (map[string]any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return withoutManagedFields(u.Object), nil
	}
	fields := obj.GetManagedFields()
	obj.SetManagedFields(nil)
	defer obj.SetManagedFields(fields)
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %T: %w", obj, err)
	}
	return m, nil
}

// withoutManagedFields is obj with a copy of its metadata that leaves
// managedFields out; the rest is shared.
func withoutManagedFields(obj map[string]any) map[string]any {
	md, ok := obj["metadata"].(map[string]any)
	if _, has := md["managedFields"]; !ok || !has {
		return obj
	}
	out := maps.Clone(obj)
	md = maps.Clone(md)
	delete(md, "managedFields")
	out["metadata"] = md
	return out
}

// ownerUIDIndex indexes the cached objects of every declared type by their
// owner UID label, so that prune and status find a resource's objects
// without scanning the cache.
const ownerUIDIndex = "stencil.dev/owner-uid"

// IndexOwnerUID adds the owner UID index to indexer (a cache) for every
// type of types: prune lists a resource's objects of declared types by it.
func IndexOwnerUID(indexer client.FieldIndexer, types CachedTypes) error {
	for gvk := range types.Whole {
		err := indexer.IndexField(context.Background(), types.NewObject(gvk), ownerUIDIndex, func(o client.Object) []string {
			if uid := o.GetLabels()[v1alpha1.LabelOwnerUID]; uid != "" {
				return []string{uid}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("indexing %s by owner: %w", gvk.Kind, err)
		}
	}
	return nil
}

// ResourceVersion is o's resourceVersion as an integer, to compare with
// another; 0 when it is not one.
func ResourceVersion(o metav1.Object) uint64 {
	rv, err := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
	if err != nil {
		return 0
	}
	return rv
}
