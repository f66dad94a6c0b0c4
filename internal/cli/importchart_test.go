package cli

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/internal/dev/scaffold"
	"github.com/stencil-operator/stencil/internal/testing/testutil"
)

// TestImportVerifyWritesNothingOnFailure: import chart --verify checks
// before it writes: without helm it says where helm comes from, and when
// helm template renders otherwise it fails; either way the project is as
// it was, so that the import can be run again once fixed.
func TestImportVerifyWritesNothingOnFailure(t *testing.T) {
	chart, err := filepath.Abs("../dev/chartimport/testdata/charts/shop")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := scaffold.Init(root, scaffold.Options{Module: "example.com/shops", StencilVersion: "v0.1.0"}); err != nil {
		t.Fatal(err)
	}
	// A helm whose template renders one ConfigMap, whatever it is given.
	other := filepath.Join(t.TempDir(), "helm")
	script := "#!/bin/sh\nprintf 'apiVersion: v1\\nkind: ConfigMap\\nmetadata: {name: other}\\n'\n"
	if err := os.WriteFile(other, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(root)
	before := testutil.Files(t, root)
	for _, tt := range []struct{ name, helm, want string }{
		{"no helm", filepath.Join(root, "bin", "helm"), "there is no helm at"},
		{"helm renders otherwise", other, "do not render as helm template does (nothing was written)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := execute(t, "import", "chart", chart, "--group", "shops.example.com", "--verify", "--helm", tt.helm)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("import chart --verify: %v, want an error with %q\n%s", err, tt.want, out)
			}
			if after := testutil.Files(t, root); !maps.Equal(before, after) {
				t.Errorf("the failed import changed the project")
			}
		})
	}
}

// TestImportOverAnEarlierImportUpgrades: import chart over the kind an
// import of the chart's previous version made brings in the new version:
// the chart's files are replaced, one it no longer has is removed, the
// project's own files and _kind.yaml declarations are kept, the Go type
// and registrations stay as they were, and the output says what changed
// (the versions, the files, the values). A kind written by hand is never
// replaced.
func TestImportOverAnEarlierImportUpgrades(t *testing.T) {
	chart := filepath.Join(t.TempDir(), "shop")
	if err := os.CopyFS(chart, os.DirFS("../dev/chartimport/testdata/charts/shop")); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := scaffold.Init(root, scaffold.Options{Module: "example.com/shops", StencilVersion: "v0.1.0"}); err != nil {
		t.Fatal(err)
	}
	t.Chdir(root)
	if out, _, err := execute(t, "import", "chart", chart, "--group", "shops.example.com"); err != nil {
		t.Fatalf("the first import: %v\n%s", err, out)
	}
	edit := func(path, old, new string) {
		t.Helper()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), old) {
			t.Fatalf("%s has no %q", path, old)
		}
		if err := os.WriteFile(path, []byte(strings.Replace(string(data), old, new, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The project's own: a test case, and a declaration.
	own := filepath.Join("templates", "shop", "tests", "mine", "input.yaml")
	if err := os.MkdirAll(filepath.Dir(own), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(own, []byte("# mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The project's own declarations: a field, an owned type made
	// optional, a hook's node given a readiness rule.
	decl := filepath.Join("templates", "shop", "_kind.yaml")
	var declared map[string]any
	if err := yaml.Unmarshal([]byte(readOrEmpty(t, decl)), &declared); err != nil {
		t.Fatal(err)
	}
	declared["tpl"] = "any"
	for _, o := range declared["owns"].([]any) {
		if o := o.(map[string]any); o["kind"] == "ConfigMap" {
			o["optional"] = true
		}
	}
	graph := declared["graph"].(map[string]any)
	hook := ""
	for name := range graph {
		if strings.Contains(name, "migrate") {
			hook = name
			graph[name].(map[string]any)["readyWhen"] = []any{"true"}
		}
	}
	if hook == "" {
		t.Fatalf("no hook node in %v", graph)
	}
	data, err := yaml.Marshal(declared)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(decl, data, 0o644); err != nil {
		t.Fatal(err)
	}
	kept := map[string]string{}
	for _, p := range []string{filepath.Join("api", "shops", "v1alpha1", "shop_types.go"), "main.go", "go.mod"} {
		kept[p] = readOrEmpty(t, p)
	}

	// The chart's next version: a new value, a template gone, one edited.
	edit(filepath.Join(chart, "Chart.yaml"), "version: 0.3.1", "version: 0.4.0")
	edit(filepath.Join(chart, "values.yaml"), "\n", "\nbanner: welcome\n")
	if err := os.Remove(filepath.Join(chart, "templates", "ingress.yaml")); err != nil {
		t.Fatal(err)
	}
	edit(filepath.Join(chart, "templates", "configmap.yaml"), "data:\n", "data:\n  banner: {{ .Values.banner | quote }}\n")
	out, _, err := execute(t, "import", "chart", chart, "--group", "shops.example.com")
	if err != nil {
		t.Fatalf("the import of the next version: %v\n%s", err, out)
	}
	t.Log(out)
	for _, want := range []string{
		"Upgraded kind Shop in templates/shop/ from chart version 0.3.1 to 0.4.0",
		"Removed (1):\n  templates/shop/ingress.yaml",
		"templates/shop/configmap.yaml",
		"Kept (the project's own) (1):\n  templates/shop/tests/mine/input.yaml",
		"Kept in _kind.yaml (the project's own declarations): graph node " + hook + " as the project declared it, owns v1 ConfigMap as the project declared it, tpl",
		"+ banner (default welcome)",
		"The kind's CRD changes",
		"stencil diff --all --templates templates",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the output does not say %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join("templates", "shop", "ingress.yaml")); err == nil {
		t.Error("the template the chart no longer has is still there")
	}
	if after := readOrEmpty(t, decl); !strings.Contains(after, "tpl: any") || !strings.Contains(after, "readyWhen") || !strings.Contains(after, "optional: true") || readOrEmpty(t, own) != "# mine\n" {
		t.Errorf("the project's own declarations or test case were not kept:\n%s", after)
	}
	if !strings.Contains(readOrEmpty(t, filepath.Join("templates", "shop", "configmap.yaml")), "banner") {
		t.Error("the edited template was not brought in")
	}
	for p, before := range kept {
		if readOrEmpty(t, p) != before {
			t.Errorf("%s changed", p)
		}
	}

	// An import list that names a file no import writes.
	list := filepath.Join("templates", "shop", "_import.txt")
	if err := os.WriteFile(list, []byte(readOrEmpty(t, list)+"go.mod\ntemplates/shop/../../main.go\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := execute(t, "import", "chart", chart, "--group", "shops.example.com"); err == nil || !strings.Contains(err.Error(), "which no import writes") {
		t.Errorf("an import list naming go.mod: %v", err)
	}
	for _, p := range []string{"go.mod", "main.go"} {
		if readOrEmpty(t, p) != kept[p] {
			t.Errorf("%s was removed or changed", p)
		}
	}

	// A kind written by hand in the way.
	if err := os.Remove(filepath.Join("templates", "shop", "_chart.yaml")); err != nil {
		t.Fatal(err)
	}
	before := testutil.Files(t, root)
	if _, _, err := execute(t, "import", "chart", chart, "--group", "shops.example.com"); err == nil || !strings.Contains(err.Error(), "is not a kind a chart import made") {
		t.Errorf("an import over a kind written by hand: %v", err)
	}
	if !maps.Equal(before, testutil.Files(t, root)) {
		t.Error("the refused import changed the project")
	}
}

func readOrEmpty(t *testing.T, path string) string {
	t.Helper()
	data, _ := os.ReadFile(path)
	return string(data)
}
