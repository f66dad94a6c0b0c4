package render

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	yamlv2 "go.yaml.in/yaml/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
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
		if err := keyCollision(top, ""); err != nil {
			return nil, fmt.Errorf("ambiguous: %w", err)
		}
		return decodeDocumentViaJSON(doc)
	}
	o := &unstructured.Unstructured{Object: obj}
	if o.GroupVersionKind().Kind == "" { // no kind, or an apiVersion that does not parse
		return decodeDocumentViaJSON(doc) // for the decoder's own error
	}
	return o, nil
}

// errSameKeys: two keys of one map, different in YAML, are one JSON key.
var errSameKeys = errors.New("two keys of one map are one key in JSON")

// keyCollision finds, in v, two keys of one map that differ in YAML but are
// one key once written as JSON ({1: a, "1": b}, {true: a, "true": b}),
// with different values: which value the JSON round trip keeps would
// change from one render to the next. path is where v is, for the error.
// Keys are visited in order, so a document always gets the same error.
func keyCollision(v any, path string) error {
	switch v := v.(type) {
	case map[any]any:
		keys := jsonKeys(v)
		for i := 1; i < len(keys); i++ {
			a, b := keys[i-1], keys[i]
			if a.json == b.json && !reflect.DeepEqual(v[a.yaml], v[b.yaml]) {
				return fmt.Errorf("%w: at %s, %s and %s are both %q, with different values (quote the key you mean)",
					errSameKeys, cmp.Or(path, "the top level"), a.desc, b.desc, a.json)
			}
		}
		for _, k := range keys {
			if err := keyCollision(v[k.yaml], strings.TrimPrefix(path+"."+k.json, ".")); err != nil {
				return err
			}
		}
	case []any:
		for i, item := range v {
			if err := keyCollision(item, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// yamlKey is a YAML map key, the JSON key it becomes and its description.
type yamlKey struct {
	yaml       any
	json, desc string
}

// jsonKeys are m's keys that sigs.k8s.io/yaml writes as JSON, ordered by
// their JSON key, then their description.
func jsonKeys(m map[any]any) []yamlKey {
	keys := make([]yamlKey, 0, len(m))
	for k := range m {
		if s, ok := jsonKey(k); ok {
			keys = append(keys, yamlKey{yaml: k, json: s, desc: describeKey(k)})
		}
	}
	slices.SortFunc(keys, func(a, b yamlKey) int {
		return cmp.Or(strings.Compare(a.json, b.json), strings.Compare(a.desc, b.desc))
	})
	return keys
}

// jsonKey is the JSON key sigs.k8s.io/yaml writes for the YAML key k;
// false for the keys it refuses.
func jsonKey(k any) (string, bool) {
	switch k := k.(type) {
	case string:
		return validUTF8(k), true
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

// validUTF8 is s as encoding/json writes it: each byte that is not UTF-8
// replaced by U+FFFD.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s { // an invalid byte ranges as utf8.RuneError, alone
		b.WriteRune(r)
	}
	return b.String()
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

// decode parses a stream of YAML documents into objects, skipping empty ones
// (a template turned off by the spec renders nothing).
//
// more is called before each document with the number of objects decoded
// so far; an error from it stops the decoding (the render's limits).
func decode(out []byte, more func(decoded int) error) ([]*unstructured.Unstructured, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out)))
	var objs []*unstructured.Unstructured
	for n := 1; ; n++ {
		if err := more(len(objs)); err != nil {
			return nil, err
		}
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading output document %d: %w", n, err)
		}
		o, err := decodeDocument(doc)
		if err != nil {
			return nil, fmt.Errorf("output document %d is %w", n, err)
		}
		items, err := Flatten(o)
		if err != nil {
			return nil, fmt.Errorf("output document %d is %w", n, err)
		}
		objs = append(objs, items...)
	}
}

// Flatten is o, or the items of o when it is a list (kind: List, as
// kubectl and Helm apply it: each item on its own); nil for nil.
func Flatten(o *unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	if o == nil {
		return nil, nil
	}
	if !o.IsList() {
		return []*unstructured.Unstructured{o}, nil
	}
	var out []*unstructured.Unstructured
	err := o.EachListItem(func(item runtime.Object) error {
		u, ok := item.(*unstructured.Unstructured)
		if !ok || u.GroupVersionKind().Kind == "" {
			return errors.New("a list whose item is not a Kubernetes object (no apiVersion or kind)")
		}
		out = append(out, u)
		return nil
	})
	return out, err
}

// DecodeObjects reads a YAML stream of objects (as kubectl get -o yaml
// prints them: a List is unpacked) into a Snapshot.
func DecodeObjects(data []byte) (Objects, error) {
	docs, err := decode(data, func(int) error { return nil })
	if err != nil {
		return nil, err
	}
	var out Objects
	for _, o := range docs {
		if !o.IsList() {
			out = append(out, o)
			continue
		}
		err := o.EachListItem(func(item runtime.Object) error {
			out = append(out, item.(*unstructured.Unstructured))
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
