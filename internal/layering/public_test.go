package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestMainUsesOnlyThePublicAPI: stencil's own binary is built as a project
// made by `stencil init` is, from the public API (pkg/stencil), its API
// types and its templates, so nothing the samples use is out of a
// project's reach.
func TestMainUsesOnlyThePublicAPI(t *testing.T) {
	root := strings.TrimSuffix(module, "/")
	for _, p := range packages(t) {
		if p.ImportPath != root {
			continue
		}
		for _, dep := range p.Imports {
			dep, ours := strings.CutPrefix(dep, module)
			if !ours {
				continue
			}
			if dep != "pkg/stencil" && dep != "templates" && !strings.HasPrefix(dep, "api/") {
				t.Errorf("main.go imports %s; it may import only pkg/stencil, templates and api/… (what a project has)", dep)
			}
		}
		return
	}
	t.Fatal("go list found no main package at the module's root")
}

// public is every exported name of the public packages, methods as
// Type.Method: the surface a project depends on, kept small. A new name
// here is a promise to every project; say so in the CHANGELOG.
var public = map[string][]string{
	"pkg/stencil":     {"Decorator", "Kind", "Main", "Project", "Project.Execute"},
	"pkg/stenciltest": {"ChartRendersAsHelm", "Cluster", "Cluster.InstallCRDs", "Cluster.RunOperator", "Options", "SamplesBecomeReady", "StartCluster", "TemplateTestsPass"},
}

// TestPublicSurfaceIsSmall fails when a public package exports a name the
// table above does not list, or no longer exports one it does.
func TestPublicSurfaceIsSmall(t *testing.T) {
	for pkg, want := range public {
		got := exported(t, filepath.Join("..", "..", pkg))
		if !slices.Equal(got, want) {
			t.Errorf("%s exports %v, want %v (internal/layering's table lists the public API)", pkg, got, want)
		}
	}
}

// exported lists the exported top-level names and methods of the
// package in dir (not its tests), sorted.
func exported(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			names = append(names, declNames(d)...)
		}
	}
	slices.Sort(names)
	return names
}

func declNames(d ast.Decl) []string {
	var names []string
	switch d := d.(type) {
	case *ast.FuncDecl:
		if !d.Name.IsExported() {
			return nil
		}
		if d.Recv == nil {
			return []string{d.Name.Name}
		}
		typ := d.Recv.List[0].Type
		if star, ok := typ.(*ast.StarExpr); ok {
			typ = star.X
		}
		if id, ok := typ.(*ast.Ident); ok && id.IsExported() {
			return []string{id.Name + "." + d.Name.Name}
		}
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				if s.Name.IsExported() {
					names = append(names, s.Name.Name)
				}
			case *ast.ValueSpec:
				for _, n := range s.Names {
					if n.IsExported() {
						names = append(names, n.Name)
					}
				}
			}
		}
	}
	return names
}
