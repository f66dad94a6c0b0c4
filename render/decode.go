package render

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf8"

	yamlv2 "go.yaml.in/yaml/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// errUncommon: a YAML value that toJSONValue leaves to the JSON round trip.
var errUncommon = errors.New("a value the direct conversion leaves to the JSON round trip")

// decodeDocument is one output document as an object, nil for an empty
// document. It is what sigs.k8s.io/yaml's YAMLToJSON, then
// Unstructured.UnmarshalJSON, make of doc (integers as int64, the same
// errors), without the JSON in between: the YAML parser's values are
// converted to the JSON types directly. A document holding a value whose
// JSON round trip is not a plain copy (a float, a non-string key, a
// string that is not UTF-8, a kindless object, ...) takes that round trip.
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
	obj, err := toJSONObject(top)
	if err != nil {
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

// toJSONObject is m with string keys and JSON-typed values, or errUncommon.
func toJSONObject(m map[any]any) (map[string]any, error) {
	out := make(map[string]any, len(m))
	for k, v := range m {
		key, ok := k.(string)
		if !ok || !utf8.ValidString(key) {
			return nil, errUncommon
		}
		jv, err := toJSONValue(v)
		if err != nil {
			return nil, err
		}
		out[key] = jv
	}
	return out, nil
}

// toJSONValue is v as a JSON decoder that keeps integers (k8s.io's
// util/json) gives it back after encoding/json wrote it: strings, booleans,
// nulls and integers as they are (int64), maps and lists converted in
// depth. Anything else is errUncommon.
func toJSONValue(v any) (any, error) {
	switch v := v.(type) {
	case nil, bool, int64:
		return v, nil
	case string:
		if !utf8.ValidString(v) {
			return nil, errUncommon // encoding/json replaces each bad byte
		}
		return v, nil
	case int:
		return int64(v), nil
	case map[any]any:
		return toJSONObject(v)
	case []any:
		out := make([]any, len(v))
		for i, item := range v {
			jv, err := toJSONValue(item)
			if err != nil {
				return nil, err
			}
			out[i] = jv
		}
		return out, nil
	default: // float64, uint64 and whatever else the parser returns
		return nil, errUncommon
	}
}
