package reconciler

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// ownedRecord is what managedFields records of the fields that manager owns
// through Apply on the object itself (not a subresource): the FieldsV1 JSON
// of its entries.
func ownedRecord(entries []metav1.ManagedFieldsEntry, manager string) []string {
	var record []string
	for _, e := range entries {
		if e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "" && e.FieldsV1 != nil {
			record = append(record, e.FieldsV1.GetRawString())
		}
	}
	return record
}

// missingFields are the fields that the base record owns and the live one
// does not. When the two are byte for byte the same (the API server encodes
// field sets in one order), nothing is missing and nothing is parsed.
func missingFields(base, live []string) (*fieldpath.Set, error) {
	if slices.Equal(base, live) {
		return &fieldpath.Set{}, nil
	}
	was, err := parseRecord(base)
	if err != nil {
		return nil, err
	}
	is, err := parseRecord(live)
	if err != nil {
		return nil, err
	}
	return was.Difference(is), nil
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
	var cur any = obj
	for _, pe := range path {
		next, ok := step(cur, pe)
		if !ok {
			return "", false
		}
		cur = next
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
