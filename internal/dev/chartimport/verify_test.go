package chartimport

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stencil-operator/stencil/render"
)

// helmBinary is the pinned helm (hack/tools), which make test builds.
func helmBinary(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("STENCIL_BIN_DIR")
	if dir == "" {
		dir = "../../../bin"
	}
	helm, err := filepath.Abs(filepath.Join(dir, "helm"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(helm); err != nil {
		t.Fatalf("no pinned helm (make tools builds it): %v", err)
	}
	return helm
}

const shopChart = "testdata/charts/shop"

// importedKind is the chart at dir and the kind gvk an import makes of it,
// declared from its values files (the declaration and notes logged).
func importedKind(t *testing.T, dir string, gvk schema.GroupVersionKind) (*Chart, *render.Kind) {
	t.Helper()
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Convert(c)
	if err != nil {
		t.Fatal(err)
	}
	cases, err := c.cases()
	if err != nil {
		t.Fatal(err)
	}
	decl, err := Declare(gvk, f, cases.values())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("_kind.yaml:\n%s", decl)
	for _, n := range f.Notes {
		t.Logf("note: %s", n)
	}
	k, err := Kind(gvk, f, decl)
	if err != nil {
		t.Fatal(err)
	}
	return c, k
}

// TestShopRendersAsHelmDoes imports the test chart (hooks, .Release,
// .Chart, .Capabilities, tpl, required, empty-map values, nested defaults,
// a null that removes a default, a subchart with a condition) and checks
// the kind's render against helm template, object by object, for each of
// its values files.
func TestShopRendersAsHelmDoes(t *testing.T) {
	c, k := importedKind(t, shopChart, schema.GroupVersionKind{Group: "shops.example.com", Version: "v1alpha1", Kind: "Shop"})
	results, err := Verify(helmBinary(t), shopChart, c, k, "rel", "ns1")
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 4 {
		t.Errorf("%d values files compared, want 4 (values.yaml and ci/*)", len(results))
	}
	for _, r := range results {
		switch {
		case r.Err != nil:
			t.Errorf("%s: %v", r.ValuesFile, r.Err)
		case r.Objects < 4:
			t.Errorf("%s: %d objects compared; the test chart renders more", r.ValuesFile, r.Objects)
		}
		for _, d := range r.Differences {
			t.Errorf("%s", d)
		}
	}
}

// TestVerifyMasksGeneratedValues: a chart that generates a password and a
// certificate (different at every render, in Helm's too) and whose hook
// Job has ttlSecondsAfterFinished: 0 (which stencil raises, to see it
// complete) renders as helm template does: the generated fields are
// compared for being there, a checksum of them too, and the TTL as
// stencil runs the hook.
func TestVerifyMasksGeneratedValues(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: gen\nversion: 0.1.0\n",
		"values.yaml": "name: gen\nresources:\n  limits: null\n  requests: {cpu: 1m}\n",
		"templates/secret.yaml": `{{- $ca := genCA "gen-ca" 365 -}}
apiVersion: v1
kind: Secret
metadata:
  name: {{ .Release.Name }}-auth
data:
  password: {{ randAlphaNum 16 | b64enc }}
  ca.crt: {{ $ca.Cert | b64enc }}
`,
		"templates/configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-cfg
  annotations:
    checksum/secret: {{ include (print $.Template.BasePath "/secret.yaml") . | sha256sum }}
data:
  name: {{ .Values.name }}
  resources: {{ toJson .Values.resources | quote }}
`,
		"templates/job.yaml": `apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Release.Name }}-init
  annotations: {"helm.sh/hook": post-install}
spec:
  ttlSecondsAfterFinished: 0
  template:
    spec:
      restartPolicy: Never
      containers: [{name: init, image: busybox}]
`,
	}
	for name, content := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c, k := importedKind(t, dir, schema.GroupVersionKind{Group: "gens.example.com", Version: "v1alpha1", Kind: "Gen"})
	results, err := Verify(helmBinary(t), dir, c, k, "release", "default")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Err != nil || len(r.Differences) > 0 {
			t.Errorf("%s: %v %v", r.ValuesFile, r.Err, r.Differences)
		}
		if r.Generated != 3 {
			t.Errorf("%s: %d generated fields, want 3 (the password, the CA, the checksum)", r.ValuesFile, r.Generated)
		}
	}
}

// TestDiffYAML: a difference between an object as helm template renders it
// and as stencil does is a unified diff of the two as YAML, Helm's lines
// "-" and stencil's "+", with the lines around them; none when the two
// print the same.
func TestDiffYAML(t *testing.T) {
	deployment := func(replicas any, extra ...string) map[string]any {
		spec := map[string]any{"replicas": replicas, "image": "nginx"}
		for _, k := range extra {
			spec[k] = "x"
		}
		return map[string]any{"kind": "Deployment", "spec": spec}
	}
	tests := []struct {
		name          string
		helm, stencil any
		want          []string // lines the diff holds; nil: no diff
	}{
		{"the same", deployment(1.0), deployment(1.0), nil},
		{"a value differs", deployment(1.0), deployment(2.0), []string{"--- helm", "+++ stencil", "-  replicas: 1", "+  replicas: 2", "   image: nginx"}},
		{"only Helm sets a field", deployment(1.0, "paused"), deployment(1.0), []string{"-  paused: x"}},
		{"only stencil sets a field", deployment(1.0), deployment(1.0, "paused"), []string{"+  paused: x"}},
		{"a string where a number was", deployment(1.0), deployment("1"), []string{"-  replicas: 1", `+  replicas: "1"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := diffYAML(tt.helm, tt.stencil)
			if tt.want == nil {
				if got != "" {
					t.Errorf("diff of two equal objects:\n%s", got)
				}
				return
			}
			lines := strings.Split(got, "\n")
			for _, w := range tt.want {
				if !slices.Contains(lines, w) {
					t.Errorf("the diff has no line %q:\n%s", w, got)
				}
			}
		})
	}
}

// TestDiffYAMLIsTheSameEveryTime: keys that the YAML encoder orders
// differently from run to run ("01-setup.sh", "0a.conf": it compares
// digits as numbers, through a map) are printed in one order, so that two
// equal objects never differ, and a diff shows only what changed.
func TestDiffYAMLIsTheSameEveryTime(t *testing.T) {
	configMap := func(late string) map[string]any {
		data := map[string]any{}
		for _, k := range []string{"00-init.sh", "01-setup.sh", "0a.conf", "1-run.sh", "10-late.sh"} {
			data[k] = "1"
		}
		data["10-late.sh"] = late
		return map[string]any{"kind": "ConfigMap", "data": data}
	}
	var first string
	for i := range 50 {
		if d := diffYAML(configMap("1"), configMap("1")); d != "" {
			t.Fatalf("run %d: a diff of two equal objects:\n%s", i, d)
		}
		d := diffYAML(configMap("1"), configMap("2"))
		if i == 0 {
			first = d
		}
		if d != first {
			t.Fatalf("run %d printed another diff:\n%s\nthe first:\n%s", i, d, first)
		}
	}
	var changed []string
	for line := range strings.Lines(first) {
		if (strings.HasPrefix(line, "-") || strings.HasPrefix(line, "+")) && !strings.HasPrefix(line, "---") && !strings.HasPrefix(line, "+++") {
			changed = append(changed, strings.TrimSpace(line))
		}
	}
	if want := []string{`-  10-late.sh: "1"`, `+  10-late.sh: "2"`}; !slices.Equal(changed, want) {
		t.Errorf("the diff changes %q, want only %q:\n%s", changed, want, first)
	}
}
