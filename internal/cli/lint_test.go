package cli

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// withTypo copies templates/ into a temporary folder and adds the issue's
// typo: a PodDisruptionBudget template for MyWeb with maxUnavailabel, the
// type declared in _kind.yaml.
func withTypo(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "templates")
	if err := os.CopyFS(dir, os.DirFS("../../templates")); err != nil {
		t.Fatal(err)
	}
	pdb := "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: {{ .Name | quote }}\nspec:\n  maxUnavailabel: 1\n  selector:\n    matchLabels: {app: web}\n"
	if err := os.WriteFile(filepath.Join(dir, "myweb", "pdb.yaml"), []byte(pdb), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "myweb", "_kind.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	if _, err := f.WriteString("- {apiVersion: policy/v1, kind: PodDisruptionBudget}\n"); err != nil {
		t.Fatal(err)
	}
	return dir
}

// execute runs the command line with args and returns its output, exit code
// and error.
func execute(t *testing.T, args ...string) (string, int, error) {
	t.Helper()
	cmd := newRootCommand(samples)
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	code := 0
	if err != nil {
		code = 1
		if exit, ok := errors.AsType[*exitError](err); ok {
			code = exit.code
		}
	}
	return out.String(), code, err
}

// repoCRDs gives the offline commands the repository's CRDs: the tests run
// in internal/cli, where the default folders (config/crd/...) are not.
const repoCRDs = "--crds=../../config/crd/bases,../../config/crd/external"

const typoMessage = "templates/myweb/pdb.yaml:6: PodDisruptionBudget default/myweb: .spec.maxUnavailabel: field not declared in schema"

// TestTypoFailsRenderLintAndTest repeats issue 29's typo: every offline
// command fails and names the template, its line, the object and the field.
func TestTypoFailsRenderLintAndTest(t *testing.T) {
	dir := withTypo(t)
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"render", []string{"render", "--templates", dir, "-f", "../../config/samples/myweb.yaml"}, 2},
		{"lint", []string{"lint", repoCRDs, "--templates", dir}, 2},
		{"test", []string{"test", repoCRDs, "--templates", dir, "myweb"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, code, err := execute(t, tt.args...)
			if code != tt.code {
				t.Fatalf("exit code %d (%v), want %d", code, err, tt.code)
			}
			if all := out + errString(err); !strings.Contains(all, typoMessage) {
				t.Errorf("does not say %q:\n%s", typoMessage, all)
			}
		})
	}
	t.Run("built-in templates pass", func(t *testing.T) {
		for _, args := range [][]string{
			{"render", "-f", "../../config/samples/myweb.yaml"},
			{"lint", "--crds", "../../config/crd/bases", "-f", "../../config/samples/myweb.yaml"},
			{"lint", repoCRDs, "--released", "../../config/crd/released", "-f", "../../config/samples"}, // no break of the release
			{"test", repoCRDs},
		} {
			if out, _, err := execute(t, args...); err != nil {
				t.Errorf("%v: %v\n%s", args, err, out)
			}
		}
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestTestUpdate: -update rewrites a stale expected.yaml, after which the
// case passes; without --templates it is refused.
func TestTestUpdate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "templates")
	if err := os.CopyFS(dir, os.DirFS("../../templates")); err != nil {
		t.Fatal(err)
	}
	expected := filepath.Join(dir, "foo", "tests", "seed", "expected.yaml")
	want, err := os.ReadFile(expected)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(expected, []byte("stale: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code, _ := execute(t, "test", repoCRDs, "--templates", dir, "foo"); code != 1 || !strings.Contains(out, "FAIL foo/seed: expected.yaml differs") {
		t.Fatalf("a stale expected.yaml: exit %d, want 1 and FAIL foo/seed:\n%s", code, out)
	}
	if _, code, err := execute(t, "test", "--update"); code != 2 || !strings.Contains(errString(err), "--templates") {
		t.Fatalf("--update without --templates: exit %d (%v), want 2 naming --templates", code, err)
	}
	if out, _, err := execute(t, "test", repoCRDs, "--templates", dir, "--update", "foo"); err != nil || !strings.Contains(out, "updated foo/seed/expected.yaml") {
		t.Fatalf("--update: %v\n%s", err, out)
	}
	if got, _ := os.ReadFile(expected); !bytes.Equal(got, want) {
		t.Errorf("--update wrote:\n%s\nwant:\n%s", got, want)
	}
	if out, _, err := execute(t, "test", repoCRDs, "--templates", dir, "foo"); err != nil {
		t.Fatalf("after --update: %v\n%s", err, out)
	}
	// A broken template is not recorded by --update: the typo still fails.
	typo := withTypo(t)
	if out, code, _ := execute(t, "test", repoCRDs, "--templates", typo, "--update", "myweb"); code != 1 || strings.Contains(out, "updated") {
		t.Fatalf("--update over a broken template: exit %d, want 1 and nothing written:\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(typo, "myweb", "tests", "seed", "error.txt")); err == nil {
		t.Error("--update recorded the broken render as error.txt")
	}
	if _, code, err := execute(t, "test", repoCRDs, "nosuchkind"); code != 2 || !strings.Contains(errString(err), "nosuchkind") {
		t.Errorf("an unknown folder: exit %d (%v), want 2", code, err)
	}
}

// TestLintSamples: lint checks every sample of a config/samples folder, and
// a stale one (a field or a kind that no longer exists, a value its CRD
// refuses) fails it, naming the file.
func TestLintSamples(t *testing.T) {
	tests := []struct {
		name string
		// file and content are written into a copy of config/samples.
		file, content string
		// want is in the output when lint must fail; "" when it must pass.
		want string
	}{
		{"the repository's samples", "", "", ""},
		{"a field that no longer exists", "myweb.yaml",
			"apiVersion: operator.k8s-summit.org/v1\nkind: MyWeb\nmetadata: {name: myweb}\nspec: {image: nginx, nodePortNumber: 30100, pageTitle: old}\n",
			`myweb.yaml: document 1: invalid MyWeb: error unmarshaling JSON: while decoding JSON: json: unknown field "pageTitle"`},
		{"a kind that no longer exists", "oldweb.yaml",
			"apiVersion: operator.k8s-summit.org/v1\nkind: OldWeb\nmetadata: {name: old}\nspec: {}\n",
			`oldweb.yaml: document 1: unknown kind "OldWeb"`},
		{"a value the CRD refuses", "full/myweb.yaml",
			"apiVersion: operator.k8s-summit.org/v1\nkind: MyWeb\nmetadata: {name: myweb}\nspec: {image: nginx, nodePortNumber: 20}\n",
			"MyWeb default/myweb: .spec.nodePortNumber: should be greater than or equal to 30000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "samples")
			if err := os.CopyFS(dir, os.DirFS("../../config/samples")); err != nil {
				t.Fatal(err)
			}
			if tt.file != "" {
				if err := os.WriteFile(filepath.Join(dir, tt.file), []byte(tt.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			out, code, err := execute(t, "lint", repoCRDs, "-f", dir)
			all := out + errString(err)
			if tt.want == "" {
				if code != 0 || !strings.Contains(out, "every object valid") {
					t.Fatalf("exit %d, want 0:\n%s", code, all)
				}
				return
			}
			if code != 2 || !strings.Contains(all, tt.want) {
				t.Fatalf("exit %d, want 2 and %q:\n%s", code, tt.want, all)
			}
		})
	}
}

// TestLintDefaultsToTheProject: in a project's root, lint reads the CRDs of
// config/crd/ and lints config/samples/ without being told (make test runs
// it on this repository): a stale sample there fails it.
func TestLintDefaultsToTheProject(t *testing.T) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	samples, err := sampleFiles([]string{filepath.Join(repo, samplesDir)})
	if err != nil || len(samples) < 12 {
		t.Fatalf("config/samples: %d samples (%v), want every kind's seed and full one", len(samples), err)
	}
	if slices.ContainsFunc(samples, func(f string) bool {
		return strings.HasSuffix(f, "kustomization.yaml") || strings.HasSuffix(f, "values.yaml")
	}) {
		t.Errorf("samples linted: %v; want no kustomization or Helm values", samples)
	}
	t.Run("this repository", func(t *testing.T) {
		t.Chdir(repo)
		if out, code, err := execute(t, "lint"); code != 0 {
			t.Fatalf("lint in the repository's root: exit %d (%v)\n%s", code, err, out)
		}
	})
	t.Run("a project with a stale sample", func(t *testing.T) {
		project := t.TempDir()
		for _, dir := range []string{"config/crd", samplesDir} {
			if err := os.CopyFS(filepath.Join(project, dir), os.DirFS(filepath.Join(repo, dir))); err != nil {
				t.Fatal(err)
			}
		}
		stale := "apiVersion: operator.k8s-summit.org/v1\nkind: MyWeb\nmetadata: {name: myweb}\nspec: {image: nginx, nodePortNumber: 30100, pageTitle: old}\n"
		if err := os.WriteFile(filepath.Join(project, samplesDir, "myweb.yaml"), []byte(stale), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Chdir(project)
		out, code, err := execute(t, "lint", "--templates", filepath.Join(repo, "templates"))
		if all := out + errString(err); code != 2 || !strings.Contains(all, `config/samples/myweb.yaml: document 1: invalid MyWeb`) {
			t.Fatalf("exit %d, want 2 naming config/samples/myweb.yaml:\n%s", code, all)
		}
	})
}

// certificateCRD is a third-party CRD, as a project keeps it in
// config/crd/external: a small cert-manager Certificate.
const certificateCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: certificates.cert-manager.io}
spec:
  group: cert-manager.io
  names: {kind: Certificate, plural: certificates}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [secretName]
            properties:
              secretName: {type: string}
              dnsNames: {type: array, items: {type: string}}
`

// TestExternalCRDs: in a project whose MyWeb template writes a Certificate,
// lint and test read its schema from config/crd/external, and report each
// unknown field of it by its path.
func TestExternalCRDs(t *testing.T) {
	tests := []struct {
		name string
		// external is config/crd/external/certificates.yaml; "" for none.
		external string
		// spec is the Certificate template's spec.
		spec string
		// want is in lint's and test's output when they must fail; "" when
		// lint must pass.
		want string
	}{
		{"the CRD in config/crd/external", certificateCRD, "secretName: web-tls\n  dnsNames: [web.example.com]", ""},
		{"no CRD", "", "secretName: web-tls", "no schema"},
		{"two typos, both reported", certificateCRD, "secretName: web-tls\n  dnsName: [web.example.com]\n  issuer: x",
			"Certificate default/myweb: .spec.dnsName: field not declared in schema; .spec.issuer: field not declared in schema"},
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			project := t.TempDir()
			templates := filepath.Join(project, "templates")
			if err := os.CopyFS(templates, os.DirFS(filepath.Join(repo, "templates"))); err != nil {
				t.Fatal(err)
			}
			if err := os.CopyFS(filepath.Join(project, "config/crd/bases"), os.DirFS(filepath.Join(repo, "config/crd/bases"))); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(project, "config/crd/external"), 0o755); err != nil {
				t.Fatal(err)
			}
			if tt.external != "" {
				if err := os.WriteFile(filepath.Join(project, "config/crd/external/certificates.yaml"), []byte(tt.external), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cert := "apiVersion: cert-manager.io/v1\nkind: Certificate\nmetadata:\n  name: {{ .Name | quote }}\nspec:\n  " + tt.spec + "\n"
			if err := os.WriteFile(filepath.Join(templates, "myweb", "certificate.yaml"), []byte(cert), 0o644); err != nil {
				t.Fatal(err)
			}
			appendFile(t, filepath.Join(templates, "myweb", "_kind.yaml"), "- {apiVersion: cert-manager.io/v1, kind: Certificate, resource: certificates}\n")
			t.Chdir(project)
			commands := [][]string{{"lint", "--templates", templates}}
			if tt.want != "" { // test also fails on expected.yaml, without the Certificate
				commands = append(commands, []string{"test", "--templates", templates, "myweb"})
			}
			for _, args := range commands {
				out, code, err := execute(t, args...)
				all := out + errString(err)
				switch {
				case tt.want == "" && code != 0:
					t.Errorf("%v: exit %d, want 0:\n%s", args, code, all)
				case tt.want != "" && (code == 0 || !strings.Contains(all, tt.want)):
					t.Errorf("%v: exit %d, want a failure saying %q:\n%s", args, code, tt.want, all)
				}
			}
		})
	}
}

func appendFile(t *testing.T, path, text string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(data, text...), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLintRefusesAnUncoveredConversion: a conversion that leaves a field
// of either version behind fails lint, naming the field, the versions and
// what to do; declared dropped, it passes.
func TestLintRefusesAnUncoveredConversion(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "templates")
	if err := os.CopyFS(dir, os.DirFS("../../templates")); err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(dir, "memcached", "_to-v1alpha1.yaml")
	src, err := os.ReadFile(to)
	if err != nil {
		t.Fatal(err)
	}
	// v1's driftPolicy no longer reaches v1alpha1 (and the case that pins
	// the conversion's output would say so too: not this test's point).
	if err := os.Remove(filepath.Join(dir, "memcached", "tests", "v1alpha1", "converted.yaml")); err != nil {
		t.Fatal(err)
	}
	forgets := strings.Replace(string(src), "{{- with index .spec \"driftPolicy\" }}\n  driftPolicy: {{ . }}\n  {{- end }}", "", 1)
	if forgets == string(src) {
		t.Fatal("the template does not convert driftPolicy as the test expects")
	}
	if err := os.WriteFile(to, []byte(forgets), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"lint", repoCRDs, "--templates", dir, "-f", "../../config/samples/memcached.yaml"}
	out, code, err := execute(t, args...)
	want := "templates/memcached: spec.driftPolicy of v1 is lost converting to v1alpha1 and back: convert it (_from-v1alpha1.yaml, _to-v1alpha1.yaml), or declare it dropped in _kind.yaml (conversion: {v1alpha1: {dropped: [spec.driftPolicy]}})"
	if code != 2 || !strings.Contains(out, want) {
		t.Fatalf("lint: exit %d (%v), want 2 and\n%s\ngot:\n%s", code, err, want, out)
	}
	// Both ways: v1alpha1 → v1 → v1alpha1 loses it on the way back.
	if !strings.Contains(out, "spec.driftPolicy of v1alpha1 is lost converting to v1 and back") || strings.Count(out, "is lost") != 2 {
		t.Errorf("lint reports another field, or not the field of both versions:\n%s", out)
	}
	declaration := filepath.Join(dir, "memcached", "_kind.yaml")
	declared, err := os.ReadFile(declaration)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(declaration, append(declared, []byte("conversion:\n  v1alpha1: {dropped: [spec.driftPolicy]}\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code, err := execute(t, args...); code != 0 {
		t.Errorf("lint with the field declared dropped: exit %d (%v)\n%s", code, err, out)
	}
}

// TestLintRefusesABreakingChange: a field of the released CRD that the
// kind's CRD no longer has fails lint, until the kind declares it.
func TestLintRefusesABreakingChange(t *testing.T) {
	released := t.TempDir()
	if err := os.CopyFS(released, os.DirFS("../../config/crd/released")); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(released, "cache.example.com_memcacheds.yaml")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// The release had spec.legacy, which the kind has dropped since.
	withLegacy := strings.Replace(string(data), "              driftPolicy:\n", "              legacy:\n                type: string\n              driftPolicy:\n", 1)
	if withLegacy == string(data) {
		t.Fatal("the released CRD does not look as the test expects")
	}
	if err := os.WriteFile(file, []byte(withLegacy), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "templates")
	if err := os.CopyFS(dir, os.DirFS("../../templates")); err != nil {
		t.Fatal(err)
	}
	args := []string{"lint", repoCRDs, "--templates", dir, "--released", released, "-f", "../../config/samples/memcached.yaml"}
	out, code, err := execute(t, args...)
	want := "templates/memcached: Memcached v1alpha1 spec.legacy: removed (or renamed): its values would be pruned, against the release (" + released + "): keep it compatible, or declare the change in _kind.yaml (breaking: {v1alpha1: [spec.legacy]})"
	if code != 2 || !strings.Contains(out, want) {
		t.Fatalf("lint: exit %d (%v), want 2 and\n%s\ngot:\n%s", code, err, want, out)
	}
	declaration := filepath.Join(dir, "memcached", "_kind.yaml")
	declared, err := os.ReadFile(declaration)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(declaration, append(declared, []byte("breaking:\n  v1alpha1: [spec.legacy]\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code, err := execute(t, args...); code != 0 {
		t.Errorf("lint with the change declared: exit %d (%v)\n%s", code, err, out)
	}
}

// TestLintRefusesARenameInThePreferredVersion: a field of the version
// kubectl preferred at the release (Memcached v1alpha1's size) that the
// new preferred version renames (v1 replicas) fails lint, saying what
// clients see, until the kind declares it; without a release, nobody has
// a habit to keep.
func TestLintRefusesARenameInThePreferredVersion(t *testing.T) {
	root := t.TempDir()
	templates, crds := filepath.Join(root, "templates"), filepath.Join(root, "crds")
	if err := os.CopyFS(templates, os.DirFS("../../templates")); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(crds, os.DirFS("../../config/crd/bases")); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(crds, "cache.example.com_memcacheds.yaml")
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(src, crd); err != nil {
		t.Fatal(err)
	}
	for i, v := range crd.Spec.Versions {
		if v.Name != "v1" {
			continue
		}
		spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
		spec.Properties["replicas"] = spec.Properties["size"]
		delete(spec.Properties, "size")
		spec.Required = []string{"replicas"}
		crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	}
	renamed, err := yaml.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, renamed, 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"lint", "--crds=" + crds + ",../../config/crd/external", "--templates", templates, "--released", "../../config/crd/released", "-f", "../../config/samples/memcached.yaml"}
	out, code, err := execute(t, args...)
	want := `templates/memcached: kubectl now resolves memcached to v1, its preferred version, which has no spec.size (v1alpha1 had it): ` + "`kubectl patch memcached`" + ` of spec.size, and any client that names no version, is dropped without an error ("patched (no change)")`
	if code != 2 || !strings.Contains(out, want) {
		t.Fatalf("lint: exit %d (%v), want 2 and\n%s\ngot:\n%s", code, err, want, out)
	}
	declaration := filepath.Join(templates, "memcached", "_kind.yaml")
	declared, err := os.ReadFile(declaration)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(declaration, []byte(strings.Replace(string(declared), "v1alpha1: [spec.autoscaled]", "v1alpha1: [spec.autoscaled, spec.size]", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _, _ := execute(t, args...); strings.Contains(out, "which has no spec.size") {
		t.Errorf("lint with the rename declared still reports it:\n%s", out)
	}
	if out, _, _ := execute(t, slices.DeleteFunc(slices.Clone(args), func(a string) bool { return a == "--released" || a == "../../config/crd/released" })...); strings.Contains(out, "preferred version") {
		t.Errorf("lint with no release reports a rename:\n%s", out)
	}
}
