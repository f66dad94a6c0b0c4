package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGraphCycleFailsRenderAndLint: a graph whose nodes wait for each other
// fails stencil render and stencil lint before anything renders, naming
// the cycle.
func TestGraphCycleFailsRenderAndLint(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "templates")
	if err := os.CopyFS(dir, os.DirFS("../../templates")); err != nil {
		t.Fatal(err)
	}
	decl := filepath.Join(dir, "appstack", "_kind.yaml")
	data, err := os.ReadFile(decl)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(decl, []byte(strings.Replace(string(data), "after: [database]", "after: [database, app]", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	const want = "kind AppStack: _kind.yaml: graph: cycle: app → migration → app"
	for _, args := range [][]string{
		{"render", "--templates", dir, "-f", "../../config/samples/appstack.yaml"},
		{"lint", repoCRDs, "--templates", dir},
	} {
		out, code, err := execute(t, args...)
		if code != 2 || !strings.Contains(out+errString(err), want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", args, code, out+errString(err), want)
		}
	}
}

// TestRenderObserved: stencil render with the live objects of a graph kind
// renders the next nodes, and says on standard error which wait.
func TestRenderObserved(t *testing.T) {
	out, code, err := execute(t, "render", "-f", "../../templates/appstack/tests/job-running/input.yaml",
		"--observed", "../../templates/appstack/tests/job-running/observed.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %v\n%s", code, err, out)
	}
	for _, want := range []string{"kind: Job", "name: shop-migrate-1-0-0", "AppStack shop: not rendered: app waits for migration: Job shop-migrate-1-0-0 to complete"} {
		if !strings.Contains(out, want) {
			t.Errorf("render --observed does not print %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "kind: Deployment") {
		t.Error("render --observed rendered the app, whose migration has not completed")
	}
}
