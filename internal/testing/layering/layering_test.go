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
// this module it may import, floor by floor from the ground: a package may
// import only what stands below it. Every package of the module has a row
// (TestImportsRunOneWay fails on one without); "*" is the top floor, which nothing imports.
var allowed = []struct {
	pkg     string
	imports []string
	why     string
}{
	// The ground: the API types and the libraries the controllers share.
	{"api", nil, "the API types import only the standard library and apimachinery"},
	{"reconciler/syncmap", nil, "a typed sync.Map: the standard library only"},
	{"reconciler/fence", nil, "the leader fence knows only client-go"},
	{"config", nil, "the install's manifests, embedded"},
	{"internal/operator/metricsauth", nil, "the metrics guard knows only the API server's reviews"},
	{"internal/dev/localcluster", nil, "the local control plane is built from Go modules alone"},
	{"internal/dev/chart", nil, "the chart writer reads a kustomization, nothing of stencil"},
	{"internal/testing/testutil", nil, "the tests' helpers stand below what they test"},
	{"internal/testing/processtest", nil, "its tests alone: the package holds no code"},
	{"internal/testing/layering", nil, "its tests alone: the package holds no code"},
	// The render: templates in, objects out.
	{"render", []string{"api"}, "render is pure: templates in, objects out"},
	// The controllers' parts, then the controllers.
	{"reconciler/engine", []string{"api", "reconciler/syncmap"}, "the SSA engine knows nothing of templates, kinds, shards or rollouts"},
	{"reconciler/rollout", []string{"api"}, "the rollout gate knows nothing of apply or status"},
	{"reconciler/shard", []string{"api", "reconciler/fence"}, "sharding knows nothing of apply or rollouts"},
	{"reconciler/decorator", []string{"api", "render", "reconciler/engine", "reconciler/fence", "reconciler/syncmap"}, "the decorator controller composes the engine, not the kind reconciler"},
	{"reconciler", []string{"api", "render", "reconciler/engine", "reconciler/rollout", "reconciler/shard", "reconciler/fence", "reconciler/syncmap"}, "the kind reconciler composes engine, rollout and shard, never the decorator controller"},
	// What an operator is made of beside its controllers.
	{"internal/operator/kinds", []string{"render"}, "a set of kinds knows their folders and types, not the controllers"},
	{"internal/operator/conversion", []string{"api", "render"}, "the conversion webhook runs the render's conversion templates"},
	// A developer's tools.
	{"internal/dev/scaffold", []string{"config", "render", "internal/operator/kinds"}, "stencil init writes a project around a set of kinds"},
	{"internal/dev/chartimport", []string{"api", "render", "internal/dev/scaffold"}, "a chart becomes a kind's folder"},
	{"internal/dev/devrun", []string{"internal/dev/localcluster"}, "make run starts a local control plane"},
	// The command line wires everything below it.
	{"internal/cli", []string{"api", "render", "reconciler", "internal/operator", "internal/dev"}, "the command line wires packages together; nothing below imports it"},
	// The public API, then the kinds stencil ships, written against it.
	{"pkg/stencil", []string{"api", "render", "internal/cli", "internal/operator/kinds"}, "the public API stands on the command line and the kinds"},
	{"pkg/stenciltest", []string{"render", "pkg/stencil", "internal/dev/chartimport", "internal/dev/localcluster"}, "the public test kit"},
	{"templates", []string{"api", "pkg/stencil"}, "stencil's own kinds, written as a user writes one"},
	// The tests' kit, each above what it builds on.
	{"internal/testing/testkind", []string{"api", "render"}, "a kind for the tests"},
	{"internal/testing/samples", []string{"internal/operator/kinds", "render", "templates"}, "stencil's own kinds as a set, for tests, benchmarks and tools"},
	{"internal/testing/testutil/testop", []string{"render", "reconciler", "internal/testing/testkind", "internal/testing/testutil"}, "an operator in a test, built from the controllers"},
	// The top floor: nothing imports it.
	{".", []string{"pkg/stencil", "templates"}, "main.go: stencil's own operator"},
	{"hack", []string{"*"}, "the project's tools and benchmarks: nothing imports them"},
	{"e2e", []string{"*"}, "the end-to-end tests: nothing imports them"},
	{"docs", []string{"*"}, "the docs' tested examples: nothing imports them"},
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
// sub-package), or pkg's row names dep or a folder above it, or "*".
func permits(pkg, dep string) bool {
	r := row(pkg)
	if row(dep) == r {
		return true
	}
	imports, _ := rule(r)
	for _, a := range imports {
		if a == "*" || dep == a || strings.HasPrefix(dep, a+"/") {
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

// relative is an import path of this module from its root ("." for the
// module's own package, main.go).
func relative(importPath string) string {
	if importPath+"/" == module {
		return "."
	}
	return strings.TrimPrefix(importPath, module)
}

// TestImportsRunOneWay fails on any import of this module's packages that
// runs against the layering table.
func TestImportsRunOneWay(t *testing.T) {
	pkgs := packages(t)
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages; want the whole module", len(pkgs))
	}
	for _, p := range pkgs {
		pkg := relative(p.ImportPath)
		if row(pkg) == "" {
			t.Errorf("%s has no row in the layering table (internal/testing/layering): give it one", pkg)
			continue
		}
		for _, dep := range p.Imports {
			if !strings.HasPrefix(dep, module) {
				continue
			}
			if dep = strings.TrimPrefix(dep, module); !permits(pkg, dep) {
				imports, why := rule(row(pkg))
				t.Errorf("%s imports %s, against the layering: %s (it may import %v; see internal/testing/layering)", pkg, dep, why, imports)
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
		{"reconciler", "reconciler/fence", true},
		{"reconciler", "internal/cli", false},
		{"reconciler/rollout", "reconciler/engine", false},
		{"render", "reconciler", false},
		{"render/schema", "api/v1alpha1", true},
		{"render", "render/schema", true},
		{"api/v1alpha1", "render", false},
		{"reconciler/engine", "reconciler/syncmap", true},
		{"reconciler/syncmap", "reconciler", false},
		{"render", "internal/operator/kinds", false},
		{"internal/operator/kinds", "internal/cli", false},
		{"internal/dev/localcluster", "reconciler", false},
		{"internal/cli", "internal/operator/conversion", true},
		{"internal/cli", "pkg/stencil", false},
		{"reconciler", "hack/bench", false},
		{"hack/bench", "internal/cli", true},
		{".", "internal/cli", false},
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
