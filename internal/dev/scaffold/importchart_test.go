package scaffold

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestImportedChartBuildsAndPasses runs `stencil import chart --verify` on
// the test chart in a copy of the repository, then what a user runs next:
// make generate manifests (the CRD gets the values' schema and defaults),
// go vet of the API types and registration, `stencil test` of the kind's
// cases (one per values file, written by the import) and `stencil lint`.
func TestImportedChartBuildsAndPasses(t *testing.T) {
	root := copyRepository(t)
	chart, err := filepath.Abs("../chartimport/testdata/charts/shop")
	if err != nil {
		t.Fatal(err)
	}
	helm, err := filepath.Abs(filepath.Join(binDir(), "helm"))
	if err != nil {
		t.Fatal(err)
	}
	out := run(t, root, "go", "run", ".", "import", "chart", chart, "--group", "shops.example.com", "--verify", "--helm", helm)
	for _, want := range []string{"Added kind Shop", "NOTES.txt is dropped", "hook becomes a graph node", "Every object of 4 values files is as helm template renders it"} {
		if !strings.Contains(out, want) {
			t.Errorf("stencil import chart says no %q:\n%s", want, out)
		}
	}
	run(t, root, "make", "generate", "manifests")
	run(t, root, "go", "vet", "./api/...", "./templates/...")
	// A minute per render, not a second: the limit is wall time, and the
	// first render of a fresh build on a loaded machine took longer.
	if out := run(t, root, "go", "run", ".", "test", "--templates", "templates", "--render-timeout", "1m", "shop"); !strings.Contains(out, "ok: 4 template tests") {
		t.Errorf("stencil test:\n%s", out)
	}
	run(t, root, "go", "run", ".", "lint", "--render-timeout", "1m")
	crd, err := os.ReadFile(filepath.Join(root, "config/crd/bases/shops.example.com_shops.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"initialDelaySeconds:", "default:", "x-kubernetes-preserve-unknown-fields: true", "nullable: true"} {
		if !strings.Contains(string(crd), want) {
			t.Errorf("the Shop CRD has no %q: stencil manifests did not write the values' schema", want)
		}
	}
}

// binDir is where the pinned tools are (make tools).
func binDir() string {
	if dir := os.Getenv("STENCIL_BIN_DIR"); dir != "" {
		return dir
	}
	return "../../../bin"
}
