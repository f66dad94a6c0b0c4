package render_test

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	shipped "github.com/stencil-operator/stencil/internal/testing/samples"
	"github.com/stencil-operator/stencil/render"
	"github.com/stencil-operator/stencil/render/kindtest"
)

// yamlLookalikes are valid names (DNS-1123 labels, so also namespaces and
// the names of every object) that YAML reads as a number, a boolean or null
// when a template prints them bare: `name: {{ .Name }}` of a resource named
// 123 is a number, and the object has no name.
var yamlLookalikes = []string{"123", "0777", "0x1f", "0o17", "0b101", "1e3", "1e-3", "on", "off", "yes", "no", "y", "n", "true", "false", "null"}

// placeholder stands for a lookalike in the render that the lookalike's is
// compared with: a plain name that no template prints by itself.
const placeholder = "placeholder"

// stringFields sets the string fields of a custom resource's spec that the
// kind's templates print, the names of other objects first, to s, and turns
// on the templates that print them. A kind not listed gets s as its name and
// namespace only.
var stringFields = map[string]func(spec map[string]any, s string){
	"flightticket": func(spec map[string]any, s string) { spec["from"] = s },
	"foo":          func(spec map[string]any, s string) { spec["deploymentName"] = s },
	"guestbook":    func(spec map[string]any, s string) { spec["configMapName"] = s },
	"myweb":        func(spec map[string]any, s string) { spec["image"], spec["pageContentHtml"] = s, s },
	"widget": func(spec map[string]any, s string) {
		spec["message"], spec["extra"], spec["configName"], spec["track"] = s, s, s, s
		spec["service"], spec["clusterRole"] = true, true
		spec["statefulSet"] = map[string]any{"storage": "1Gi", "whenDeleted": "Retain"}
	},
}

// TestYAMLLookalikeNames is a property of every kind's and decorator's
// templates, over the inputs of their golden cases: a custom resource (or
// decorated parent) whose name, namespace and spec strings are a
// yamlLookalike renders the objects that it renders with a plain name, with
// the lookalike where the plain name was, a string as it was. The templates
// must quote what they print.
func TestYAMLLookalikeNames(t *testing.T) {
	for _, s := range yamlLookalikes {
		var v map[string]any
		if errs := validation.IsDNS1123Label(s); len(errs) > 0 {
			t.Fatalf("%q is no name: %v", s, errs)
		}
		if err := yaml.Unmarshal([]byte("v: "+s), &v); err != nil || v["v"] == s {
			t.Fatalf("YAML reads %q as the string it is (%v); it is no lookalike", s, err)
		}
	}
	kinds := goldenKinds()
	for _, dirName := range slices.Sorted(maps.Keys(kinds)) {
		kind, err := render.Load(kinds[dirName])
		if err != nil {
			t.Fatal(err)
		}
		for _, dir := range renderingCases(t, dirName) {
			input := readMap(t, filepath.Join(dir, "input.yaml"))
			renderWith := func(s string) ([]*unstructured.Unstructured, error) {
				in := withName(input, s)
				if set := stringFields[dirName]; set != nil {
					spec, _ := in["spec"].(map[string]any)
					if spec == nil {
						spec = map[string]any{}
						in["spec"] = spec
					}
					set(spec, s)
				}
				data, err := yaml.Marshal(in)
				if err != nil {
					t.Fatal(err)
				}
				cr, err := kindtest.Decode(kind, data, nil) // at any version: converted to the hub
				if err != nil {
					t.Fatal(err)
				}
				return kind.Render(cr)
			}
			checkLookalikes(t, dirName+"/"+filepath.Base(dir), renderWith)
		}
	}
	decorators, err := shipped.LoadDecorators()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range decorators {
		for _, dir := range renderingCases(t, d.Name()) {
			parent := readMap(t, filepath.Join(dir, "input.yaml"))
			observed := map[string][]*unstructured.Unstructured{}
			if _, err := os.Stat(filepath.Join(dir, "observed.yaml")); err == nil {
				var lists map[string][]map[string]any
				readYAML(t, filepath.Join(dir, "observed.yaml"), &lists)
				for as, list := range lists {
					for _, o := range list {
						observed[as] = append(observed[as], &unstructured.Unstructured{Object: o})
					}
				}
			}
			renderWith := func(s string) ([]*unstructured.Unstructured, error) {
				patch, children, err := d.Render(&unstructured.Unstructured{Object: withName(parent, s)}, observed)
				if patch != nil {
					children = append([]*unstructured.Unstructured{patch}, children...)
				}
				return children, err
			}
			checkLookalikes(t, d.Name()+"/"+filepath.Base(dir), renderWith)
		}
	}
}

// checkLookalikes renders with the placeholder and with every lookalike,
// and compares.
func checkLookalikes(t *testing.T, name string, renderWith func(s string) ([]*unstructured.Unstructured, error)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		plain, err := renderWith(placeholder)
		if err != nil {
			t.Fatalf("render with name %s: %v", placeholder, err)
		}
		var failed []string
		for _, s := range yamlLookalikes {
			got, err := renderWith(s)
			if err == nil {
				err = sameObjects(plain, got, s)
			}
			if err != nil && failed == nil {
				t.Errorf("render with name %s: %v", s, err)
			}
			if err != nil {
				failed = append(failed, s)
			}
		}
		if len(failed) > 0 {
			t.Errorf("failed with names %v: quote what the templates print (| quote)", failed)
		}
	})
}

// renderingCases are the golden cases of a kind or decorator that render
// (not those that expect an error).
func renderingCases(t *testing.T, dirName string) []string {
	t.Helper()
	cases, err := filepath.Glob(filepath.Join(casesDir(dirName), "*", "expected.yaml"))
	if err != nil || len(cases) == 0 {
		t.Fatalf("no golden cases for %s: %v", dirName, err)
	}
	for i, c := range cases {
		cases[i] = filepath.Dir(c)
	}
	return cases
}

func readMap(t *testing.T, path string) map[string]any {
	t.Helper()
	var m map[string]any
	readYAML(t, path, &m)
	return m
}

// withName is a copy of the object o with name s, and namespace s when it
// has one.
func withName(o map[string]any, s string) map[string]any {
	c := (&unstructured.Unstructured{Object: o}).DeepCopy()
	c.SetName(s)
	if c.GetNamespace() != "" {
		c.SetNamespace(s)
	}
	return c.Object
}

// sameObjects: got are the objects of plain with the placeholder replaced by
// s (see sameValue).
func sameObjects(plain, got []*unstructured.Unstructured, s string) error {
	id := func(o *unstructured.Unstructured) string {
		return o.GroupVersionKind().String() + " " + o.GetNamespace() + "/" + o.GetName()
	}
	var want, have []string
	byID := map[string]*unstructured.Unstructured{}
	for _, o := range plain {
		want = append(want, strings.ReplaceAll(id(o), placeholder, s))
	}
	for _, o := range got {
		have = append(have, id(o))
		byID[id(o)] = o
	}
	slices.Sort(want)
	slices.Sort(have)
	if !slices.Equal(want, have) {
		return fmt.Errorf("objects\n  %s\nwant\n  %s", strings.Join(have, "\n  "), strings.Join(want, "\n  "))
	}
	for _, o := range plain {
		i := strings.ReplaceAll(id(o), placeholder, s)
		if err := sameValue(o.Object, byID[i].Object, s); err != nil {
			return fmt.Errorf("%s: %w", i, err)
		}
	}
	return nil
}

// sameValue: got has the keys of plain (the placeholder in them replaced by
// s), lists of the same lengths and leaves of the same types. A string leaf
// is plain's with the placeholder replaced by s; a string without the
// placeholder may differ (a hash of the input).
func sameValue(plain, got any, s string) error {
	switch p := plain.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("%T %v, want a map", got, got)
		}
		if len(g) != len(p) {
			return fmt.Errorf("keys %v, want %v", slices.Sorted(maps.Keys(g)), slices.Sorted(maps.Keys(p)))
		}
		for k, v := range p {
			gk := strings.ReplaceAll(k, placeholder, s)
			gv, ok := g[gk]
			if !ok {
				return fmt.Errorf("no key %q", gk)
			}
			if err := sameValue(v, gv, s); err != nil {
				return fmt.Errorf("%s: %w", gk, err)
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(p) {
			return fmt.Errorf("%T %v, want a list of %d", got, got, len(p))
		}
		for i := range p {
			if err := sameValue(p[i], g[i], s); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
	case string:
		g, ok := got.(string)
		switch {
		case !ok:
			return fmt.Errorf("%T %v, want the string %q", got, got, strings.ReplaceAll(p, placeholder, s))
		case strings.Contains(p, placeholder) && g != strings.ReplaceAll(p, placeholder, s):
			return fmt.Errorf("%q, want %q", g, strings.ReplaceAll(p, placeholder, s))
		}
	default:
		if fmt.Sprintf("%T %v", got, got) != fmt.Sprintf("%T %v", plain, plain) {
			return fmt.Errorf("%T %v, want %T %v", got, got, plain, plain)
		}
	}
	return nil
}
