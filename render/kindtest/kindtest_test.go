package kindtest_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stencil-operator/stencil/internal/testing/testkind"
	"github.com/stencil-operator/stencil/render"
	"github.com/stencil-operator/stencil/render/kindtest"
)

const input = `apiVersion: test.stencil.dev/v1alpha1
kind: Widget
metadata: {name: w, namespace: default, uid: 00000000-0000-4000-8000-000000000001}
spec: {replicas: 1}
`

// TestJudge covers each way a case states what it expects.
func TestJudge(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		wantErr string // "" when the case must pass
		golden  string
	}{
		{"render only", nil, "", kindtest.ExpectedFile},
		{"a fragment that matches", map[string]string{kindtest.FragmentsFile: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: w-config}\n"}, "", kindtest.ExpectedFile},
		{"a fragment with another value", map[string]string{kindtest.FragmentsFile: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: w-config, namespace: elsewhere}\n"}, "ConfigMap w-config: .metadata.namespace differs", kindtest.ExpectedFile},
		{"a fragment of an object not rendered", map[string]string{kindtest.FragmentsFile: "apiVersion: v1\nkind: Secret\nmetadata: {name: w}\n"}, "Secret w (v1) is not rendered", kindtest.ExpectedFile},
		{"a stale expected.yaml", map[string]string{kindtest.ExpectedFile: "stale: true\n"}, "expected.yaml differs", kindtest.ExpectedFile},
		{"an error.txt for a render that succeeds", map[string]string{kindtest.ErrorFile: "boom\n"}, "wants it to fail", kindtest.ExpectedFile},
	}
	k := widget(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := kindtest.Case{Name: "c", Files: map[string][]byte{kindtest.InputFile: []byte(input)}}
			for f, data := range tt.files {
				c.Files[f] = []byte(data)
			}
			out := kindtest.RunKind(k, c, nil)
			switch {
			case tt.wantErr == "" && out.Err != nil:
				t.Fatalf("failed: %v", out.Err)
			case tt.wantErr != "" && (out.Err == nil || !strings.Contains(out.Err.Error(), tt.wantErr)):
				t.Fatalf("error %v, want one saying %q", out.Err, tt.wantErr)
			case out.Golden != tt.golden:
				t.Errorf("golden file %q, want %q", out.Golden, tt.golden)
			}
		})
	}
}

// TestCases reads a folder's cases and refuses a case without input.
func TestCases(t *testing.T) {
	folder := fstest.MapFS{
		"tests/b/input.yaml":    {Data: []byte(input)},
		"tests/b/expected.yaml": {Data: []byte("x")},
		"tests/a/input.yaml":    {Data: []byte(input)},
	}
	cases, err := kindtest.Cases(folder)
	if err != nil || len(cases) != 2 || cases[0].Name != "a" || cases[1].Files[kindtest.ExpectedFile] == nil {
		t.Fatalf("cases %+v, %v", cases, err)
	}
	if cases, err := kindtest.Cases(fstest.MapFS{"x.yaml": {}}); err != nil || len(cases) != 0 {
		t.Errorf("a folder without tests/: %v, %v", cases, err)
	}
	if _, err := kindtest.Cases(fstest.MapFS{"tests/a/expected.yaml": {}}); err == nil || !strings.Contains(err.Error(), "no input.yaml") {
		t.Errorf("a case without input: %v", err)
	}
}

func widget(t *testing.T) *render.Kind {
	t.Helper()
	k, err := render.Load(testkind.Widget())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestUpdatable: -update rewrites only the golden file a case has (or
// writes expected.yaml for a case with no expectation yet); a render that
// fails where objects are expected, or succeeds where an error is, is never
// recorded.
func TestUpdatable(t *testing.T) {
	has := func(files ...string) kindtest.Case {
		c := kindtest.Case{Files: map[string][]byte{kindtest.InputFile: {}}}
		for _, f := range files {
			c.Files[f] = []byte("x")
		}
		return c
	}
	tests := []struct {
		name   string
		c      kindtest.Case
		golden string
		want   bool
	}{
		{"a new case that renders", has(), kindtest.ExpectedFile, true},
		{"a stale expected.yaml", has(kindtest.ExpectedFile), kindtest.ExpectedFile, true},
		{"a new failure of a case that expects objects", has(kindtest.ExpectedFile), kindtest.ErrorFile, false},
		{"a new failure of a new case", has(), kindtest.ErrorFile, false},
		{"a changed error", has(kindtest.ErrorFile), kindtest.ErrorFile, true},
		{"a case that expects an error and renders", has(kindtest.ErrorFile), kindtest.ExpectedFile, false},
		{"a fragments-only case", has(kindtest.FragmentsFile), kindtest.ExpectedFile, false},
	}
	for _, tt := range tests {
		if got := (kindtest.Outcome{Golden: tt.golden}).Updatable(tt.c); got != tt.want {
			t.Errorf("%s: Updatable = %v, want %v", tt.name, got, tt.want)
		}
	}
	if _, err := kindtest.Cases(fstest.MapFS{"tests/a/input.yaml": {Data: []byte("x")}, "tests/a/error.txt": {Data: []byte("x")}, "tests/a/expected.yaml": {Data: []byte("x")}}); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Error("a case with both error.txt and expected.yaml was accepted")
	}
}

// TestAPIVersionsFile: a case's api-versions.txt says which optional owned
// types the cluster serves in it; a line that names none of the kind's is
// refused.
func TestAPIVersionsFile(t *testing.T) {
	def := testkind.Widget()
	def.Templates = fstest.MapFS{
		"_kind.yaml": {Data: []byte("owns:\n- {apiVersion: v1, kind: ConfigMap}\n- {apiVersion: cert-manager.io/v1, kind: Certificate, optional: true}\n")},
		"configmap.yaml": {Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata: {name: w-config}
data:
  served: {{ (capabilities).APIVersions.Has "cert-manager.io/v1/Certificate" | quote }}
`)},
	}
	k, err := render.Load(def)
	if err != nil {
		t.Fatal(err)
	}
	fragment := func(served string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: w-config}\ndata: {served: \"" + served + "\"}\n"
	}
	tests := []struct {
		name string
		// versions is the case's api-versions.txt (absent when "").
		versions string
		// served is what the template must see.
		served string
		// wantErr is what the case's failure says ("" when it passes).
		wantErr string
	}{
		{name: "no file: none served", served: "false"},
		{name: "the type", versions: "cert-manager.io/v1/Certificate\n", served: "true"},
		{name: "its group/version, with a comment and blank lines", versions: "# cert-manager installed\n\ncert-manager.io/v1 # any kind of it\n", served: "true"},
		{name: "only comments: none served", versions: "# nothing\n", served: "false"},
		{name: "a type the kind does not own as optional", versions: "v1/ConfigMap\n", wantErr: `api-versions.txt: line 1: "v1/ConfigMap" names no optional owned type`},
		{name: "a typo", versions: "cert-manager.io/v1/Certificat\n", wantErr: "names no optional owned type of Widget"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := kindtest.Case{Name: "c", Files: map[string][]byte{kindtest.InputFile: []byte(input), kindtest.FragmentsFile: []byte(fragment(tt.served))}}
			if tt.versions != "" {
				c.Files[kindtest.APIVersionsFile] = []byte(tt.versions)
			}
			out := kindtest.RunKind(k, c, nil)
			switch {
			case tt.wantErr == "" && out.Err != nil:
				t.Fatalf("failed: %v", out.Err)
			case tt.wantErr != "" && (out.Err == nil || !strings.Contains(out.Err.Error(), tt.wantErr)):
				t.Fatalf("error %v, want one saying %q", out.Err, tt.wantErr)
			}
		})
	}
}
