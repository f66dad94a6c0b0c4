package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/stencil-operator/stencil/"

// allowed is, for each package (and the packages under it), the packages of
// this module it may import. A package of the module that no row matches
// (internal/cli, main, hack/…, the tests' helpers) may import anything.
var allowed = []struct {
	pkg     string
	imports []string
	why     string
}{
	{"api", nil, "the API types import only the standard library and apimachinery"},
	{"render", []string{"api"}, "render is pure: templates in, objects out"},
	{"internal/syncmap", nil, "a typed sync.Map: the standard library only"},
	{"reconciler/engine", []string{"api", "internal/syncmap"}, "the SSA engine knows nothing of templates, kinds, shards or rollouts"},
	{"reconciler/rollout", []string{"api"}, "the rollout gate knows nothing of apply or status"},
	{"reconciler/shard", []string{"api", "internal/fence"}, "sharding knows nothing of apply or rollouts"},
	{"reconciler/decorator", []string{"api", "render", "reconciler/engine", "internal/fence", "internal/syncmap"}, "the decorator controller composes the engine, not the kind reconciler"},
	{"reconciler", []string{"api", "render", "reconciler/engine", "reconciler/rollout", "reconciler/shard", "internal/fence", "internal/syncmap"}, "the kind reconciler composes engine, rollout and shard, never the decorator controller"},
}

// row is the row of the table that governs pkg: the longest that is pkg or
// a folder above it ("" when none does).
func row(pkg string) string {
	best := ""
	for _, r := range allowed {
		if (pkg == r.pkg || strings.HasPrefix(pkg, r.pkg+"/")) && len(r.pkg) > len(best) {
			best = r.pkg
		}
	}
	return best
}

// rule is the row named r.
func rule(r string) (imports []string, why string) {
	for _, a := range allowed {
		if a.pkg == r {
			return a.imports, a.why
		}
	}
	return nil, ""
}

// permits reports whether pkg may import dep: dep is of pkg's own row (a
// sub-package), or its row is one pkg's row names, or it has no row and is
// under a package pkg's row names (internal/fence).
func permits(pkg, dep string) bool {
	r, d := row(pkg), row(dep)
	if d == r {
		return true
	}
	imports, _ := rule(r)
	for _, a := range imports {
		if d == a || d == "" && (dep == a || strings.HasPrefix(dep, a+"/")) {
			return true
		}
	}
	return false
}

type listed struct {
	ImportPath string
	Imports    []string
}

// packages lists the module's packages with their imports (not their
// tests'), with every build tag the tests use.
func packages(t *testing.T) []listed {
	t.Helper()
	out, err := exec.Command("go", "list", "-tags", "e2e", "-json=ImportPath,Imports", module+"...").Output()
	if err != nil {
		if exit, ok := errors.AsType[*exec.ExitError](err); ok {
			t.Fatalf("go list: %v: %s", err, exit.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// TestImportsRunOneWay fails on any import of this module's packages that
// runs against the layering table.
func TestImportsRunOneWay(t *testing.T) {
	pkgs := packages(t)
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages; want the whole module", len(pkgs))
	}
	for _, p := range pkgs {
		pkg := strings.TrimPrefix(p.ImportPath, module)
		if row(pkg) == "" {
			continue
		}
		for _, dep := range p.Imports {
			if !strings.HasPrefix(dep, module) {
				continue
			}
			if dep = strings.TrimPrefix(dep, module); !permits(pkg, dep) {
				imports, why := rule(row(pkg))
				t.Errorf("%s imports %s, against the layering: %s (it may import %v; see internal/layering)", pkg, dep, why, imports)
			}
		}
	}
}

// TestTheRuleCatchesABackwardImport: the table refuses the imports the
// layering forbids, and allows those it names.
func TestTheRuleCatchesABackwardImport(t *testing.T) {
	for _, tt := range []struct {
		pkg, dep string
		want     bool
	}{
		{"reconciler/engine", "reconciler", false},
		{"reconciler/engine", "render", false},
		{"reconciler/engine", "reconciler/rollout", false},
		{"reconciler/decorator", "reconciler", false},
		{"reconciler/decorator", "reconciler/engine", true},
		{"reconciler", "reconciler/decorator", false},
		{"reconciler", "reconciler/engine", true},
		{"reconciler", "internal/fence", true},
		{"reconciler", "internal/cli", false},
		{"reconciler/rollout", "reconciler/engine", false},
		{"render", "reconciler", false},
		{"render/schema", "api/v1alpha1", true},
		{"render", "render/schema", true},
		{"api/v1alpha1", "render", false},
	} {
		if got := permits(tt.pkg, tt.dep); got != tt.want {
			t.Errorf("%s importing %s allowed = %v, want %v", tt.pkg, tt.dep, got, tt.want)
		}
	}
}

// TestLowerTestsLinkNoController: the tests of the engine, rollouts and
// shards link neither controller (through a shared test helper, say), so
// they test those packages alone and stay fast.
func TestLowerTestsLinkNoController(t *testing.T) {
	for _, pkg := range []string{"reconciler/engine", "reconciler/rollout", "reconciler/shard"} {
		out, err := exec.Command("go", "list", "-tags", "e2e", "-test", "-deps", "-f", "{{.ImportPath}}", module+pkg).Output()
		if err != nil {
			t.Fatalf("go list -test -deps %s: %v", pkg, err)
		}
		for dep := range strings.SplitSeq(string(out), "\n") {
			if dep == module+"reconciler" || dep == module+"reconciler/decorator" {
				t.Errorf("the tests of %s link %s", pkg, strings.TrimPrefix(dep, module))
			}
		}
	}
}
