package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/lru"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// This file trims an owned object the cache holds whole, unstructured,
// down to what stencil reads of it:
//   - its apiVersion, kind, metadata (managedFields included: the drift
//     check and hand-over read every manager's entries) and status;
//   - the fields stencil's field manager owns, as its managedFields entry
//     records them: what the template set, which is what a status
//     template reads of it (a Deployment's spec.replicas);
//   - the spec fields health rules read (healthSpec).
//
// The rest (the fields the API server defaulted, and those other writers
// set that stencil does not) is dropped before the object is stored: a
// Deployment's pod template is most of its size, and most of that is
// defaults. An object stencil's manager owns nothing of is kept whole:
// nothing says what to keep.

// healthSpec are the spec fields kstatus reads (a Deployment's replicas
// and progress deadline, a StatefulSet's update strategy, a Job's
// parallelism and completions, a Service's type and cluster IP), kept
// whole whoever set them.
var healthSpec = []string{"replicas", "updateStrategy", "progressDeadlineSeconds", "paused", "parallelism", "completions", "type", "clusterIP"}

// kept are the top-level fields kept whole.
var kept = map[string]bool{"apiVersion": true, "kind": true, "metadata": true, "status": true}

// Trim is obj, an unstructured object, trimmed in place (see above).
// Other objects, and objects whose record does not parse, are returned as
// they are: an informer drops an object its transform fails on, which
// would leave the cache stale.
//
// Typed objects are left whole: a typed object's fields are inline
// structs, so trimming one saves little (124 of a Deployment's 3,500
// bytes) for a conversion to maps and back at every watch event; an
// unstructured object is maps, and its trimmed spec is freed (a
// Deployment-sized object: 15.8 KB whole, 10.7 KB trimmed, the rest its
// metadata).
func Trim(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	keep := keepOf(u.GetManagedFields())
	if keep == nil {
		return obj, nil
	}
	trimMap(u.Object, keep)
	return u, nil
}

// trimMap drops, of an object's top-level fields other than kept, what
// keep does not hold.
func trimMap(obj map[string]any, keep *fieldpath.Set) {
	spec, _ := obj["spec"].(map[string]any)
	health := map[string]any{}
	for _, f := range healthSpec {
		if v, ok := spec[f]; ok {
			health[f] = v
		}
	}
	defer func() {
		if len(health) == 0 {
			return
		}
		spec, _ := obj["spec"].(map[string]any)
		if spec == nil {
			spec = map[string]any{}
			obj["spec"] = spec
		}
		maps.Copy(spec, health)
	}()
	for k, v := range obj {
		if kept[k] {
			continue
		}
		if out, ok := keepOnly(v, fieldpath.PathElement{FieldName: &k}, keep); ok {
			obj[k] = out
		} else {
			delete(obj, k)
		}
	}
}

// keepOnly is v, found at pe in a value whose fields set holds, with only
// what set holds of it, and whether set holds any of it. A member is kept
// whole; a child is kept as far as its own set.
func keepOnly(v any, pe fieldpath.PathElement, set *fieldpath.Set) (any, bool) {
	child, ok := set.Children.Get(pe)
	if !ok {
		// A member with no children: a leaf, or an atomic map or list.
		return v, set.Members.Has(pe)
	}
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			if kept, ok := keepOnly(x, fieldpath.PathElement{FieldName: &k}, child); ok {
				out[k] = kept
			}
		}
		return out, true
	case []any:
		if byIndex(child) {
			return v, true // dropping an item would move the others
		}
		out := make([]any, 0, len(v))
		for _, x := range v {
			if kept, ok := keepItem(x, child); ok {
				out = append(out, kept)
			}
		}
		return out, true
	}
	return v, true
}

// byIndex: set names a list's items by index (a list with no keys).
func byIndex(set *fieldpath.Set) bool {
	found := false
	set.Members.Iterate(func(pe fieldpath.PathElement) { found = found || pe.Index != nil })
	set.Children.Iterate(func(pe fieldpath.PathElement) { found = found || pe.Index != nil })
	return found
}

// keepItem is a list's item x as far as set holds it, by key or value.
func keepItem(x any, set *fieldpath.Set) (any, bool) {
	// SetNodeMap.All ignores a break: find the item's element first.
	var found *fieldpath.PathElement
	set.Children.Iterate(func(pe fieldpath.PathElement) {
		if found == nil && matches(x, pe) {
			found = &pe
		}
	})
	if found == nil {
		for pe := range set.Members.All() {
			if matches(x, pe) {
				return x, true
			}
		}
		return nil, false
	}
	kept, ok := keepOnly(x, *found, set)
	if m, isMap := kept.(map[string]any); isMap && found.Key != nil {
		for _, f := range *found.Key { // an item keeps its key: readers find it by it
			m[f.Name] = x.(map[string]any)[f.Name]
		}
	}
	return kept, ok
}

// keepOf is what to keep of an object whose managedFields are entries
// (healthSpec aside): the fields stencil's manager owns through Apply on
// the object itself, outside metadata and status (kept whole anyway); nil
// when it owns none, or its record does not parse. Its objects' records differ in their metadata
// (ownerReferences name each resource's UID); past it, the objects of one
// template share theirs, which is parsed once (parsedRecords).
func keepOf(entries []metav1.ManagedFieldsEntry) *fieldpath.Set {
	record := OwnedRecord(entries, FieldManager)
	if len(record) == 0 {
		return nil
	}
	key, err := beyondMetadata(record)
	if err != nil {
		return nil
	}
	if set, ok := parsedRecords.Get(key); ok {
		return set.(*fieldpath.Set)
	}
	set := &fieldpath.Set{}
	if err := set.FromJSON(strings.NewReader(key)); err != nil {
		return nil
	}
	if len(key) <= maxRemembered {
		parsedRecords.Add(key, set)
	}
	return set
}

// parsedRecords are the keep sets of the records last parsed, by
// beyondMetadata's key (a set is never changed once made).
var parsedRecords = lru.New(256)

// maxRemembered bounds the records whose keep sets parsedRecords holds.
// A record is written by whoever may update the object: one who may edit
// objects stencil applies can forge a record on each (up to the API
// server's 1.5 MB), and a parsed set holds more than its text. The
// records of stencil's own applies are a few KiB (a Deployment's about
// 1); a larger one is parsed at each watch event and not kept, so the
// sets held stay under 256 times this.
const maxRemembered = 8 << 10

// beyondMetadata is the record's fields outside metadata and status, as
// one FieldsV1 JSON object (keys sorted).
func beyondMetadata(record []string) (string, error) {
	fields := map[string]json.RawMessage{}
	for _, raw := range record {
		var top map[string]json.RawMessage
		if err := json.Unmarshal([]byte(raw), &top); err != nil {
			return "", fmt.Errorf("parsing stencil's managedFields: %w", err)
		}
		for k, v := range top {
			if k == "f:metadata" || k == "f:status" {
				continue
			}
			if was, ok := fields[k]; ok && !bytes.Equal(was, v) {
				return strings.Join(record, ""), errSeveral
			}
			fields[k] = v
		}
	}
	out, err := json.Marshal(fields)
	return string(out), err
}

// errSeveral: stencil's manager has several Apply entries that record
// one field differently (the API server keeps one per manager and
// subresource): nothing is trimmed.
var errSeveral = errors.New("several records of stencil's apply")
