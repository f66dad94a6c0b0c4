package engine

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// OwnedRecord is what managedFields records of the fields that manager owns
// through Apply on the object itself (not a subresource): the FieldsV1 JSON
// of its entries.
func OwnedRecord(entries []metav1.ManagedFieldsEntry, manager string) []string {
	var record []string
	for _, e := range entries {
		if e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "" && e.FieldsV1 != nil {
			record = append(record, e.FieldsV1.GetRawString())
		}
	}
	return record
}

// MissingFields are the fields that the base record owns, or that were left
// out of the apply for other managers (leftOut), and that the live record
// does not own. When nothing was left out and the two records are byte for
// byte the same (the API server encodes field sets in one order), nothing
// is missing and nothing is parsed.
func MissingFields(base, live []string, leftOut *fieldpath.Set) (*fieldpath.Set, error) {
	if slices.Equal(base, live) && (leftOut == nil || leftOut.Empty()) {
		return &fieldpath.Set{}, nil
	}
	was, err := parseRecord(base)
	if err != nil {
		return nil, err
	}
	if leftOut != nil {
		was = was.Union(leftOut)
	}
	is, err := parseRecord(live)
	if err != nil {
		return nil, err
	}
	return was.Difference(is), nil
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

func parseRecord(record []string) (*fieldpath.Set, error) {
	set := &fieldpath.Set{}
	for _, raw := range record {
		s := &fieldpath.Set{}
		if err := s.FromJSON(strings.NewReader(raw)); err != nil {
			return nil, fmt.Errorf("parsing managedFields: %w", err)
		}
		set = set.Union(s)
	}
	return set, nil
}

// holder finds the manager, other than ours, that now holds path.
func holder(entries []metav1.ManagedFieldsEntry, path fieldpath.Path, ours string) (string, *metav1.Time) {
	for _, e := range entries {
		if e.Manager == ours && e.Operation == metav1.ManagedFieldsOperationApply || e.FieldsV1 == nil {
			continue
		}
		s := &fieldpath.Set{}
		if s.FromJSON(e.FieldsV1.GetRawReader()) == nil && s.Has(path) {
			return e.Manager, e.Time
		}
	}
	return "", nil
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
