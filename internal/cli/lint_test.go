package cli

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	defer f.Close()
	if _, err := f.WriteString("- {apiVersion: policy/v1, kind: PodDisruptionBudget}\n"); err != nil {
		t.Fatal(err)
	}
	return dir
}

// execute runs the command line with args and returns its output, error and
// exit code.
func execute(t *testing.T, args ...string) (string, error, int) {
	t.Helper()
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	code := 0
	if err != nil {
		code = 1
		var exit *exitError
		if errors.As(err, &exit) {
			code = exit.code
		}
	}
	return out.String(), err, code
}

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
		{"lint", []string{"lint", "--templates", dir}, 2},
		{"test", []string{"test", "--templates", dir, "myweb"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err, code := execute(t, tt.args...)
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
			{"test"},
		} {
			if out, err, _ := execute(t, args...); err != nil {
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
	if out, _, code := execute(t, "test", "--templates", dir, "foo"); code != 1 || !strings.Contains(out, "FAIL foo/seed: expected.yaml differs") {
		t.Fatalf("a stale expected.yaml: exit %d, want 1 and FAIL foo/seed:\n%s", code, out)
	}
	if _, err, code := execute(t, "test", "--update"); code != 2 || !strings.Contains(errString(err), "--templates") {
		t.Fatalf("--update without --templates: exit %d (%v), want 2 naming --templates", code, err)
	}
	if out, err, _ := execute(t, "test", "--templates", dir, "--update", "foo"); err != nil || !strings.Contains(out, "updated foo/seed/expected.yaml") {
		t.Fatalf("--update: %v\n%s", err, out)
	}
	if got, _ := os.ReadFile(expected); !bytes.Equal(got, want) {
		t.Errorf("--update wrote:\n%s\nwant:\n%s", got, want)
	}
	if out, err, _ := execute(t, "test", "--templates", dir, "foo"); err != nil {
		t.Fatalf("after --update: %v\n%s", err, out)
	}
	// A broken template is not recorded by --update: the typo still fails.
	typo := withTypo(t)
	if out, _, code := execute(t, "test", "--templates", typo, "--update", "myweb"); code != 1 || strings.Contains(out, "updated") {
		t.Fatalf("--update over a broken template: exit %d, want 1 and nothing written:\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(typo, "myweb", "tests", "seed", "error.txt")); err == nil {
		t.Error("--update recorded the broken render as error.txt")
	}
	if _, err, code := execute(t, "test", "nosuchkind"); code != 2 || !strings.Contains(errString(err), "nosuchkind") {
		t.Errorf("an unknown folder: exit %d (%v), want 2", code, err)
	}
}
