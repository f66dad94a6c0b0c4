package chartimport

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestHelmIgnore: a chart folder's .helmignore leaves files out as Helm's
// loader does (a pattern, a folder, a path pattern; subcharts' files too),
// and the dotfiles under templates/; the rest is read, and so are the
// values files of ci/ that it ignores (the chart's test cases).
func TestHelmIgnore(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{
		"Chart.yaml":               "name: app\nversion: 1.0.0\n",
		"values.yaml":              "{}\n",
		".helmignore":              "# comments and blank lines\n\n*.md\nci-tools/\ntemplates/skip-*.yaml\nci/\n",
		"ci/small-values.yaml":     "replicas: 1\n",
		"README.md":                "readme",
		"ci-tools/run.sh":          "#!/bin/sh\n",
		"templates/cm.yaml":        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
		"templates/skip-me.yaml":   "{{ fail \"ignored\" }}\n",
		"templates/keep.yaml":      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
		"templates/.hidden.yaml":   "{{ fail \"a dotfile\" }}\n",
		"templates/NOTES.txt":      "notes",
		"files/config.md":          "ignored by *.md",
		"charts/db/Chart.yaml":     "name: db\nversion: 0.1.0\n",
		"charts/db/templates/x.md": "ignored by *.md",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for name := range c.Files {
		got = append(got, name)
	}
	slices.Sort(got)
	want := []string{".helmignore", "Chart.yaml", "charts/db/Chart.yaml", "ci/small-values.yaml", "templates/NOTES.txt", "templates/cm.yaml", "templates/keep.yaml", "values.yaml"}
	if !slices.Equal(got, want) {
		t.Errorf("files read %v, want %v", got, want)
	}
}
