package render

import (
	"bytes"
	"fmt"
	"unicode/utf8"

	yamlv2 "go.yaml.in/yaml/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// maxDirectDepth bounds the nesting the direct conversion follows; deeper
// documents take the JSON round trip, whose decoder refuses nesting past
// 10,000 levels.
const maxDirectDepth = 1000

// decodeDocument is one output document as an object, nil for an empty
// document. It is what sigs.k8s.io/yaml's YAMLToJSON, then
// Unstructured.UnmarshalJSON, make of doc (integers as int64, the same
// errors), without the JSON in between: the YAML parser's values are
// converted to the JSON types directly. A document holding a value whose
// JSON round trip is not a plain copy (a float, a non-string key, a
// string that is not UTF-8, a kindless object, ...) takes that round trip.
// Both start from go.yaml.in/yaml/v2, the parser sigs.k8s.io/yaml uses; the
// tests hold the two to the same results.
func decodeDocument(doc []byte) (*unstructured.Unstructured, error) {
	var parsed any
	if err := yamlv2.Unmarshal(doc, &parsed); err != nil {
		return decodeDocumentViaJSON(doc)
	}
	if parsed == nil {
		return nil, nil
	}
	top, ok := parsed.(map[any]any)
	if !ok {
		return decodeDocumentViaJSON(doc)
	}
	obj, ok := toJSONObject(top, 1)
	if !ok {
		return decodeDocumentViaJSON(doc)
	}
	o := &unstructured.Unstructured{Object: obj}
	if o.GetKind() == "" {
		return decodeDocumentViaJSON(doc) // for the decoder's own error
	}
	return o, nil
}

// decodeDocumentViaJSON is decodeDocument through JSON bytes.
func decodeDocumentViaJSON(doc []byte) (*unstructured.Unstructured, error) {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}
	if t := bytes.TrimSpace(js); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return nil, nil
	}
	o := &unstructured.Unstructured{}
	if err := o.UnmarshalJSON(js); err != nil {
		return nil, fmt.Errorf("not a Kubernetes object: %w", err)
	}
	return o, nil
}

// toJSONObject is m with string keys and JSON-typed values; false when some
// key or value is not one toJSONValue converts.
func toJSONObject(m map[any]any, depth int) (map[string]any, bool) {
	if depth > maxDirectDepth {
		return nil, false
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		key, ok := k.(string)
		if !ok || !utf8.ValidString(key) {
			return nil, false
		}
		if out[key], ok = toJSONValue(v, depth+1); !ok {
			return nil, false
		}
	}
	return out, true
}

// toJSONValue is v as it comes back from a JSON encoding and k8s.io's
// util/json decoding (which keeps integers): strings, booleans, nulls and
// integers (as int64) unchanged, maps and lists converted in depth. Other
// values (floats, integers beyond int64, bytes, times) are not converted:
// false.
func toJSONValue(v any, depth int) (any, bool) {
	switch v := v.(type) {
	case nil, bool, int64:
		return v, true
	case string:
		return v, utf8.ValidString(v) // encoding/json replaces each bad byte
	case int:
		return int64(v), true
	case map[any]any:
		return toJSONObject(v, depth)
	case []any:
		return toJSONList(v, depth)
	default:
		return nil, false
	}
}

// toJSONList is l with JSON-typed items, as toJSONValue.
func toJSONList(l []any, depth int) ([]any, bool) {
	if depth > maxDirectDepth {
		return nil, false
	}
	out := make([]any, len(l))
	for i, item := range l {
		var ok bool
		if out[i], ok = toJSONValue(item, depth+1); !ok {
			return nil, false
		}
	}
	return out, true
}
