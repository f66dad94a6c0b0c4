package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// This file makes the body of an apply (sendable): the desired object
// without the fields it must not send (those other managers hold under
// policy Report, those handed over), with the version its verdict read.
// Below it: the paths into an object that the body and the drift report
// walk, the preview of an apply, and the part of a live object that our
// manager's record holds.

// sendable is the body of the apply of d on verdict v. Under policy Report
// it leaves out the fields that other managers hold (a new render must not
// revert what Report only reports), and returns them as leftOut; it never
// sends a field handed over to another manager; an adoption of a
// create-only object sends only what makes it the resource's; and it
// carries the version the verdict read, or absentVersion for a
// create-first apply.
func sendable(d *unstructured.Unstructured, v verdict, report bool) (body *unstructured.Unstructured, leftOut *fieldpath.Set, err error) {
	body = d
	if v.live != nil {
		if report {
			body, leftOut, err = withoutOthersFields(d, v.live.GetManagedFields(), FieldManager)
		}
		if err == nil {
			body, err = WithoutHandedOver(body, v.handOver, v.live.GetManagedFields())
		}
		if err != nil {
			return nil, nil, fmt.Errorf("reading the managers of %s %s: %w", d.GetKind(), client.ObjectKeyFromObject(d), err)
		}
		if v.handOver != nil && leftOut != nil {
			leftOut = leftOut.RecursiveDifference(v.handOver)
		}
	}
	if v.decision == adopt && CreateOnly(d) {
		// A create-only object's content is a value made once: adopting
		// one takes it over as it is (stencil's labels, annotations and
		// owner), never replacing its content with this render's.
		body = adoptionBody(d)
	}
	switch {
	case v.decision == create:
		body = body.DeepCopy()
		body.SetResourceVersion(absentVersion)
	case v.resourceVersion != "":
		body = body.DeepCopy()
		body.SetResourceVersion(v.resourceVersion)
	}
	return body, leftOut, nil
}

// absentVersion is the resourceVersion of a create-first apply. The API
// server creates an object that does not exist whatever version the apply
// names, and refuses, with a conflict, to apply to an existing object whose
// version differs (the optimistic lock of the API conventions). No storage
// gives an object this version: it is the largest a version can be
// (etcd's revisions, and kine's, count up from 1).
const absentVersion = "18446744073709551615"

// adoptionBody is the apply that adopts d's live object without touching
// its content: d's identity and metadata, which make the object the
// resource's.
func adoptionBody(d *unstructured.Unstructured) *unstructured.Unstructured {
	meta := map[string]any{"name": d.GetName()}
	if ns := d.GetNamespace(); ns != "" {
		meta["namespace"] = ns
	}
	for _, key := range []string{"labels", "annotations", "ownerReferences"} {
		if v, ok := d.Object["metadata"].(map[string]any)[key]; ok {
			meta[key] = runtime.DeepCopyJSONValue(v)
		}
	}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": d.GetAPIVersion(), "kind": d.GetKind(), "metadata": meta}}
}

// withoutOthersFields is d without the fields that other managers hold and
// ours does not (a copy; d is left as it is), and the set of those it left
// out. The key fields of list items always stay: an item needs them.
func withoutOthersFields(d *unstructured.Unstructured, entries []metav1.ManagedFieldsEntry, ours string) (*unstructured.Unstructured, *fieldpath.Set, error) {
	theirs, err := othersFields(entries, ours)
	if err != nil || theirs.Empty() {
		return d, nil, err
	}
	out, leftOut := d.DeepCopy(), &fieldpath.Set{}
	for path := range theirs.Leaves().All() {
		if isItemKey(path) || isMetadata(path) {
			continue
		}
		if _, found := valueAt(out.Object, path); found {
			removeAt(out.Object, path)
			leftOut.Insert(path)
		}
	}
	if leftOut.Empty() {
		return d, nil, nil
	}
	return out, leftOut, nil
}

// othersFields are the fields of the object itself (and its scale
// subresource, as `kubectl scale` and autoscalers write it) that managers
// other than ours hold and ours does not.
func othersFields(entries []metav1.ManagedFieldsEntry, ours string) (*fieldpath.Set, error) {
	mine, theirs := &fieldpath.Set{}, &fieldpath.Set{}
	for _, e := range entries {
		if e.FieldsV1 == nil || e.Subresource == "status" {
			continue
		}
		s := &fieldpath.Set{}
		if err := s.FromJSON(e.FieldsV1.GetRawReader()); err != nil {
			return nil, fmt.Errorf("parsing managedFields of %s: %w", e.Manager, err)
		}
		if e.Manager == ours && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "" {
			mine = mine.Union(s)
		} else {
			theirs = theirs.Union(s)
		}
	}
	return theirs.Difference(mine), nil
}

// WithoutHandedOver is body without the fields at or under the hand-over
// paths (fields, HandOver's set) that another manager holds now: a copy
// when anything is left out. Only those very fields go, never a whole subtree: what stencil alone
// still sets under a handed-over map stays in the apply, so server-side
// apply keeps it. The key fields of list items stay too.
func WithoutHandedOver(body *unstructured.Unstructured, fields *fieldpath.Set, entries []metav1.ManagedFieldsEntry) (*unstructured.Unstructured, error) {
	if fields == nil {
		return body, nil
	}
	theirs, err := othersFields(entries, FieldManager)
	if err != nil || theirs.Empty() {
		return body, err
	}
	taken := theirs.Leaves().Difference(theirs.Leaves().RecursiveDifference(fields))
	out := body
	taken.Iterate(func(p fieldpath.Path) {
		if isItemKey(p) || isMetadata(p) {
			return
		}
		if _, found := valueAt(out.Object, p); !found {
			return
		}
		if out == body {
			out = body.DeepCopy()
		}
		removeAt(out.Object, p)
	})
	return out, nil
}

// isMetadata: path is under metadata, whose labels, annotations and
// ownerReferences carry stencil's own stamp and always stay.
func isMetadata(path fieldpath.Path) bool {
	return len(path) > 0 && path[0].FieldName != nil && *path[0].FieldName == "metadata"
}

// isItemKey: path ends in a key field of the list item before it.
func isItemKey(path fieldpath.Path) bool {
	if len(path) < 2 || path[len(path)-1].FieldName == nil || path[len(path)-2].Key == nil {
		return false
	}
	name := *path[len(path)-1].FieldName
	for _, f := range *path[len(path)-2].Key {
		if f.Name == name {
			return true
		}
	}
	return false
}

// removeAt deletes the value at path from obj, when it is there.
func removeAt(obj map[string]any, path fieldpath.Path) {
	if len(path) == 0 {
		return
	}
	last := path[len(path)-1]
	if last.FieldName != nil {
		if parent, ok := walk(obj, path[:len(path)-1]); ok {
			if m, ok := parent.(map[string]any); ok {
				delete(m, *last.FieldName)
			}
		}
		return
	}
	// A list item: lists are values in Go, so rebuild the list in the map
	// that holds it.
	if len(path) < 2 || path[len(path)-2].FieldName == nil {
		return
	}
	holder, _ := walk(obj, path[:len(path)-2])
	m, ok := holder.(map[string]any)
	if !ok {
		return
	}
	name := *path[len(path)-2].FieldName
	list, _ := m[name].([]any)
	m[name] = slices.DeleteFunc(slices.Clone(list), func(item any) bool { return matches(item, last) })
}

// valueAt returns the value at path in obj (an unstructured object) as
// JSON, and whether it is there.
func valueAt(obj map[string]any, path fieldpath.Path) (string, bool) {
	cur, ok := walk(obj, path)
	if !ok {
		return "", false
	}
	// JSON as a person reads it: no \u003c for "<".
	var out strings.Builder
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(cur); err != nil {
		return "", false
	}
	return strings.TrimSuffix(out.String(), "\n"), true
}

// walk descends path from cur, and reports whether it is all there.
func walk(cur any, path fieldpath.Path) (any, bool) {
	for _, pe := range path {
		next, ok := step(cur, pe)
		if !ok {
			return nil, false
		}
		cur = next
	}
	return cur, true
}

// step descends one path element: a field, a list item by key, by value or
// by index.
func step(cur any, pe fieldpath.PathElement) (any, bool) {
	switch {
	case pe.FieldName != nil:
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		v, ok := m[*pe.FieldName]
		return v, ok
	case pe.Index != nil:
		l, ok := cur.([]any)
		if !ok || *pe.Index >= len(l) {
			return nil, false
		}
		return l[*pe.Index], true
	}
	l, ok := cur.([]any)
	if !ok {
		return nil, false
	}
	for _, item := range l {
		if matches(item, pe) {
			return item, true
		}
	}
	return nil, false
}

func matches(item any, pe fieldpath.PathElement) bool {
	if pe.Value != nil {
		return value.Equals(value.NewValueInterface(item), *pe.Value)
	}
	m, ok := item.(map[string]any)
	if !ok || pe.Key == nil {
		return false
	}
	for _, f := range *pe.Key {
		v, ok := m[f.Name]
		if !ok || !value.Equals(value.NewValueInterface(v), f.Value) {
			return false
		}
	}
	return true
}

// PreviewBody is what a reconcile would apply for d onto live (nil: not
// there yet), for previews of an apply: nothing (false) for a create-only
// object that exists, or one on its way out; an error for an object that
// is not the resource's (stencil leaves it alone: OwnershipConflict); else
// d without the fields handed over to another manager and, under drift
// policy Report, without those other managers hold.
func PreviewBody(d, live *unstructured.Unstructured, report bool) (*unstructured.Unstructured, bool, error) {
	switch {
	case live == nil:
		return d, true, nil
	case !ownedFor(live, d) && !adoptedBy(live, d):
		return nil, false, fmt.Errorf("%w: %s (%s); stencil leaves it alone, with reason %s", ErrNotOurs, conflictWith(d, live).object, holderOf(live), v1alpha1.ReasonOwnershipConflict)
	case CreateOnly(d) || live.GetDeletionTimestamp() != nil:
		return nil, false, nil
	}
	body := d
	var err error
	if report {
		body, _, err = withoutOthersFields(d, live.GetManagedFields(), FieldManager)
	}
	if err == nil {
		body, err = WithoutHandedOver(body, HandOver(d), live.GetManagedFields())
	}
	return body, err == nil, err
}

// ErrNotOurs says that an object in the way of a rendered one is not the
// resource's.
var ErrNotOurs = errors.New("not this resource's")

// ExtractOwned is the part of full that the record owned holds, with
// full's UID as the apply's precondition; nil when full's type has no
// built-in schema.
func ExtractOwned(full *unstructured.Unstructured, owned []string) (*unstructured.Unstructured, error) {
	// status (never ours) and managedFields out first: a field a newer API
	// server added there is not in client-go's schemas, and would fail the
	// conversion.
	trimmed := full.DeepCopy()
	delete(trimmed.Object, "status")
	trimmed.SetManagedFields(nil)
	tv, err := builtinTypes().ObjectToTyped(trimmed, typed.AllowDuplicates)
	if err != nil {
		return nil, nil //nolint:nilerr // no schema: reported, never corrected
	}
	set, err := parseRecord(owned)
	if err != nil {
		return nil, err
	}
	m, ok := tv.ExtractItems(set.Leaves(), typed.WithAppendKeyFields()).AsValue().Unstructured().(map[string]any)
	if !ok {
		return nil, fmt.Errorf("extracting the fields stencil owns: not an object")
	}
	obj := &unstructured.Unstructured{Object: m}
	obj.SetGroupVersionKind(full.GroupVersionKind())
	obj.SetNamespace(full.GetNamespace())
	obj.SetName(full.GetName())
	obj.SetUID(full.GetUID())
	return obj, nil
}

// builtinTypes converts built-in objects to typed values, for extraction:
// parsed once, on first use (the schemas cost memory).
var builtinTypes = sync.OnceValue(func() managedfields.TypeConverter {
	return applyconfigurations.NewTypeConverter(clientgoscheme.Scheme)
})
