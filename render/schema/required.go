package schema

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	runtimeschema "k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

//go:generate go run ../../hack/genrequired -o zz_generated.required.go

// missingRequired lists the required fields that a built-in object of kind
// gvk lacks, walking its Go type beside its content. Which fields are
// required comes from requiredFields, generated from the API types' sources
// by the rule Kubernetes' OpenAPI generator applies: a field is required
// unless its json tag has omitempty or omitzero or its comment says
// +optional (+required makes it required whatever its tag).
func missingRequired(gvk runtimeschema.GroupVersionKind, content map[string]any) []Problem {
	obj, err := clientgoscheme.Scheme.New(gvk)
	if err != nil {
		return nil
	}
	var out []Problem
	walkRequired(reflect.TypeOf(obj), content, "", &out)
	return out
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

// walkRequired checks value, of Go type t, at path.
func walkRequired(t reflect.Type, value any, path string, out *[]Problem) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshaler) {
		return // a scalar in JSON: a quantity, an int-or-string, a time
	}
	switch t.Kind() {
	case reflect.Struct:
		if m, ok := value.(map[string]any); ok {
			walkStruct(t, m, path, out)
		}
	case reflect.Slice:
		if items, ok := value.([]any); ok {
			for i, item := range items {
				walkRequired(t.Elem(), item, fmt.Sprintf("%s[%d]", path, i), out)
			}
		}
	case reflect.Map:
		if m, ok := value.(map[string]any); ok {
			for _, k := range slices.Sorted(maps.Keys(m)) {
				walkRequired(t.Elem(), m[k], path+"."+k, out)
			}
		}
	}
}

func walkStruct(t reflect.Type, m map[string]any, path string, out *[]Problem) {
	required := requiredFields[t.PkgPath()+"."+t.Name()]
	for f := range t.Fields() {
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case tag == "-" || !f.IsExported():
		case f.Anonymous && tag == "", strings.Contains(f.Tag.Get("json"), ",inline"):
			walkStruct(derefType(f.Type), m, path, out)
		default:
			v, present := m[tag]
			if present && v != nil {
				walkRequired(f.Type, v, path+"."+tag, out)
			} else if slices.Contains(required, tag) {
				*out = append(*out, Problem{Path: path + "." + tag, Message: "Required value"})
			}
		}
	}
}

func derefType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}
