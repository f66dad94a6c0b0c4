package chartimport

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/internal/dev/scaffold"
	"github.com/stencil-operator/stencil/render"
	"github.com/stencil-operator/stencil/render/kindtest"
)

// Options say what kind a chart becomes.
type Options struct {
	// Kind is the kind's name (default: the chart's name in CamelCase).
	Kind string
	// Group is the kind's API group, such as charts.example.com.
	Group string
	// Version is the kind's API version (default v1alpha1).
	Version string
	// Tpl is the kind's tpl policy ("" or own: its chart's own values
	// only; any: its resources' values too, as Helm does).
	Tpl string
	// Check, when set, runs on the chart and the kind made of it before
	// anything is written (import chart --verify): an error leaves the
	// project as it was.
	Check func(c *Chart, k *render.Kind) error
}

// Import adds the chart at chartPath (a folder or archive) to the project
// at root as a kind: its Go type (a spec of the chart's values), its
// template folder, samples and a test case per values file, with the
// render of that case as its expected output, and the lines that register
// it. Over a kind an earlier import of the chart made (the same group,
// version and kind), it brings in this version of the chart instead (see
// [Upgrade]): the Go type and registrations stay. It returns the kind's
// folder name, the notes of what changed in the conversion, and what the
// upgrade changed (nil for a new kind).
// The defaults it takes are written into o.
func Import(root, chartPath string, o *Options) (string, []Note, *Upgrade, error) {
	c, err := Load(chartPath)
	if err != nil {
		return "", nil, nil, err
	}
	return o.importChart(root, c)
}

func (o *Options) importChart(root string, c *Chart) (string, []Note, *Upgrade, error) {
	if o.Kind == "" {
		o.Kind = Camel(c.Name)
	}
	if o.Version == "" {
		o.Version = "v1alpha1"
	}
	f, err := Convert(c)
	if err != nil {
		return "", nil, nil, err
	}
	f.Tpl = o.Tpl
	gvk := schema.GroupVersionKind{Group: o.Group, Version: o.Version, Kind: o.Kind}
	cases, err := c.cases()
	if err != nil {
		return "", nil, nil, err
	}
	decl, err := Declare(gvk, f, cases.values())
	if err != nil {
		return "", nil, nil, err
	}
	f.Files["_kind.yaml"] = decl
	if o.Check != nil {
		k, err := Kind(gvk, f, decl)
		if err != nil {
			return "", f.Notes, nil, err
		}
		if err := o.Check(c, k); err != nil {
			return "", f.Notes, nil, err
		}
	}
	files := func(lower string) (map[string][]byte, error) {
		out, err := f.project(gvk, lower, decl, cases)
		if err == nil {
			withImportList(out, lower, c.Name+" "+chartVersion(c.Files["Chart.yaml"]), decl)
		}
		return out, err
	}
	lower, upgrading, err := scaffold.ImportedChartKind(root, o.Group, o.Version, o.Kind)
	if err != nil || !upgrading {
		if err == nil {
			lower, err = scaffold.AddChartKind(root, o.Group, o.Version, o.Kind, files)
		}
		return lower, f.Notes, nil, err
	}
	out, err := files(lower)
	if err != nil {
		return "", f.Notes, nil, err
	}
	up, err := upgrade(root, lower, out)
	return lower, f.Notes, up, err
}

// testCase is one of the chart's values files, as a test case.
type testCase struct {
	name   string
	values map[string]any
	file   string // its path in the chart
}

type testCases []testCase

func (cs testCases) values() []ValuesFile {
	out := make([]ValuesFile, len(cs))
	for i, c := range cs {
		out[i] = ValuesFile{Path: c.file, Values: c.values}
	}
	return out
}

// cases are the chart's values files as test cases: "default" for
// values.yaml, the file's name without .yaml for ci/*.yaml.
func (c *Chart) cases() (testCases, error) {
	var out testCases
	for _, vf := range c.ValuesFiles() {
		values := map[string]any{}
		if vf != "values.yaml" {
			if err := yaml.Unmarshal(c.Files[vf], &values); err != nil {
				return nil, fmt.Errorf("%s: %w", vf, err)
			}
		}
		if values == nil {
			values = map[string]any{}
		}
		name := strings.TrimSuffix(path.Base(vf), ".yaml")
		if vf == "values.yaml" {
			name = "default"
		}
		out = append(out, testCase{name: name, values: values, file: vf})
	}
	return out, nil
}

// project is every file of the kind but its Go types, by path under the
// project's root: the template folder, a test case per values file, the
// samples.
func (f *Folder) project(gvk schema.GroupVersionKind, lower string, decl []byte, cases testCases) (map[string][]byte, error) {
	k, err := Kind(gvk, f, decl)
	if err != nil {
		return nil, err
	}
	served := OptionalServed(k)
	k = k.WithAPIVersions(served)
	out := map[string][]byte{}
	for name, data := range f.Files {
		out[filepath.Join("templates", lower, filepath.FromSlash(name))] = data
	}
	for _, tc := range cases {
		objs, live, err := RenderConverged(k, "release", "default", tc.values)
		if err != nil {
			return nil, fmt.Errorf("rendering the case %s: %w", tc.name, err)
		}
		dir := filepath.Join("templates", lower, "tests", tc.name)
		if len(served) > 0 {
			out[filepath.Join(dir, kindtest.APIVersionsFile)] = []byte("# The chart's custom resources' types, rendered as served.\n" + strings.Join(served, "\n") + "\n")
		}
		if live != nil {
			if out[filepath.Join(dir, kindtest.ObservedFile)], err = kindtest.Stream(live); err != nil {
				return nil, err
			}
		}
		if out[filepath.Join(dir, kindtest.InputFile)], err = resourceYAML(gvk, "release", tc.values, true); err != nil {
			return nil, err
		}
		if out[filepath.Join(dir, kindtest.ExpectedFile)], err = kindtest.Stream(objs); err != nil {
			return nil, err
		}
	}
	sample, err := resourceYAML(gvk, "example-"+lower, map[string]any{}, false)
	if err != nil {
		return nil, err
	}
	out[filepath.Join("config", "samples", lower+".yaml")] = sample
	full := map[string]any{}
	if err := yaml.Unmarshal(f.Files["_values.yaml"], &full); err != nil {
		return nil, fmt.Errorf("values.yaml: %w", err)
	}
	if out[filepath.Join("config", "samples", "full", lower+".yaml")], err = resourceYAML(gvk, lower+"-full", full, false); err != nil {
		return nil, err
	}
	return out, nil
}

// resourceYAML is a resource of kind gvk named name whose spec is values;
// a test case's also has a namespace and a UID.
func resourceYAML(gvk schema.GroupVersionKind, name string, values map[string]any, testCase bool) ([]byte, error) {
	meta := map[string]any{"name": name}
	if testCase {
		meta["namespace"], meta["uid"] = "default", "00000000-0000-4000-8000-000000000001"
	}
	return yaml.Marshal(map[string]any{"apiVersion": gvk.GroupVersion().String(), "kind": gvk.Kind, "metadata": meta, "spec": values})
}

// Camel is a chart's name as a kind: my-chart is MyChart.
func Camel(name string) string {
	var b strings.Builder
	up := true
	for _, r := range name {
		switch {
		case r == '-' || r == '_' || r == '.':
			up = true
		case up:
			b.WriteRune(unicode.ToUpper(r))
			up = false
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
