package render

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
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
		if err := sameKeys(top); err != nil {
			return nil, fmt.Errorf("not valid YAML: %w", err)
		}
		return decodeDocumentViaJSON(doc)
	}
	o := &unstructured.Unstructured{Object: obj}
	if o.GetKind() == "" {
		return decodeDocumentViaJSON(doc) // for the decoder's own error
	}
	return o, nil
}

// errSameKeys: two keys of one map, different in YAML, are one JSON key.
var errSameKeys = errors.New("keys that are one as JSON")

// sameKeys finds two keys of one map in v that differ in YAML but are one
// key once written as JSON ({1: a, "1": b}, {true: a, "true": b}): which
// value the JSON round trip keeps would change from one render to the
// next.
func sameKeys(v any) error {
	switch v := v.(type) {
	case map[any]any:
		seen := map[string]any{}
		for k, item := range v {
			if s, ok := jsonKey(k); ok {
				if other, dup := seen[s]; dup {
					a, b := describeKey(other), describeKey(k)
					a, b = min(a, b), max(a, b)
					return fmt.Errorf("%w: the map keys %s and %s are both %q", errSameKeys, a, b, s)
				}
				seen[s] = k
			}
			if err := sameKeys(item); err != nil {
				return err
			}
		}
	case []any:
		for _, item := range v {
			if err := sameKeys(item); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonKey is the JSON key sigs.k8s.io/yaml writes for the YAML key k;
// false for the keys it refuses.
func jsonKey(k any) (string, bool) {
	switch k := k.(type) {
	case string:
		return k, true
	case int:
		return strconv.Itoa(k), true
	case int64:
		return strconv.FormatInt(k, 10), true
	case bool:
		return strconv.FormatBool(k), true
	case float64:
		switch s := strconv.FormatFloat(k, 'g', -1, 32); s {
		case "+Inf":
			return ".inf", true
		case "-Inf":
			return "-.inf", true
		case "NaN":
			return ".nan", true
		default:
			return s, true
		}
	default:
		return "", false
	}
}

// describeKey is a YAML key with its type, for an error.
func describeKey(k any) string {
	switch k := k.(type) {
	case string:
		return fmt.Sprintf("string %q", k)
	case bool:
		return fmt.Sprintf("boolean %t", k)
	case float64:
		return "float " + strconv.FormatFloat(k, 'g', -1, 64)
	default:
		return fmt.Sprintf("integer %v", k)
	}
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
