package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os/exec"
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

// TestPublicPackagesLinkNoSample: what a project imports (pkg/stencil,
// pkg/stenciltest) links none of stencil's sample kinds: not package
// templates, not internal/testing/samples, no API group but the shared
// api/v1alpha1. The project's kinds reach the command line as a value.
// (internal/dev/scaffold's TestInitProjectRunsAndPasses checks a project's
// built binary too.)
func TestPublicPackagesLinkNoSample(t *testing.T) {
	for _, pkg := range []string{"pkg/stencil", "pkg/stenciltest"} {
		out, err := exec.Command("go", "list", "-deps", module+pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for dep := range strings.Lines(string(out)) {
			dep, ours := strings.CutPrefix(strings.TrimSpace(dep), module)
			if !ours {
				continue
			}
			if dep == "templates" || dep == "internal/testing/samples" || strings.HasPrefix(dep, "api/") && dep != "api/v1alpha1" {
				t.Errorf("%s links %s, of stencil's samples", pkg, dep)
			}
		}
	}
}

// public is every exported name of the public packages, methods and
// struct fields as Type.Method and Type.Field (an alias's fields too),
// with their signatures and types: the surface a project depends on, kept
// small. A new name
// here is a promise to every project; say so in the CHANGELOG.
var public = map[string][]string{
	"pkg/stencil": {
		"Decorator", "Decorator.Name string", "Decorator.Templates fs.FS",
		"Kind", "Kind.AddToScheme func(*runtime.Scheme) error", "Kind.GroupVersionKind schema.GroupVersionKind",
		"Kind.New func() v1alpha1.Object", "Kind.ShortNames []string", "Kind.Templates fs.FS",
		"Main func(p Project)",
		"Project", "Project.Decorators []Decorator", "Project.Execute func() int", "Project.Kinds []Kind", "Project.Name string",
		"Project.Run func(ctx context.Context, args []string, out io.Writer) error", "Project.Setup func(mgr manager.Manager) error",
	},
	"pkg/stenciltest": {
		"ChartRendersAsHelm func(t testing.TB, p stencil.Project, kind, chart string)",
		"Cluster", "Cluster.Config *rest.Config", "Cluster.InstallCRDs func(t testing.TB, dirs ...string)", "Cluster.Kubeconfig string",
		"Cluster.RunOperator func(t testing.TB, p stencil.Project, args ...string)",
		"Options", "Options.Args []string", "Options.Root string", "Options.Timeout time.Duration",
		"SamplesBecomeReady func(t testing.TB, p stencil.Project, o Options)", "StartCluster func(t testing.TB) *Cluster",
		"TemplateTestsPass func(t testing.TB, p stencil.Project, o Options)",
	},
}

// TestPublicSurfaceIsSmall fails when a public package exports a name the
// table above does not list, or no longer exports one it does.
func TestPublicSurfaceIsSmall(t *testing.T) {
	for pkg, want := range public {
		got := exported(t, filepath.Join("..", "..", "..", pkg))
		if !slices.Equal(got, want) {
			t.Errorf("%s exports %v, want %v (internal/testing/layering's table lists the public API)", pkg, got, want)
		}
	}
}

// exported lists the exported top-level names and methods of the
// package in dir (not its tests), and the exported fields of its struct
// types as Type.Field, those of an alias of another package of the module
// included (type Kind = render.Definition lists Kind.GroupVersionKind…),
// sorted.
func exported(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	for _, f := range parseDir(t, dir) {
		imports := map[string]string{}
		for _, imp := range f.Imports {
			path := strings.Trim(imp.Path.Value, `"`)
			name := filepath.Base(path)
			if imp.Name != nil {
				name = imp.Name.Name
			}
			imports[name] = path
		}
		for _, d := range f.Decls {
			names = append(names, declNames(d)...)
			names = append(names, fieldNames(t, d, imports)...)
		}
	}
	slices.Sort(names)
	return names
}

// parseDir parses the package in dir, not its tests.
func parseDir(t *testing.T, dir string) []*ast.File {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// fieldNames are the exported fields of d's exported struct types, as
// Type.Field; an alias of a struct type of another of the module's
// packages (imports: by name) lists that type's fields.
func fieldNames(t *testing.T, d ast.Decl, imports map[string]string) []string {
	t.Helper()
	g, ok := d.(*ast.GenDecl)
	if !ok {
		return nil
	}
	var names []string
	for _, s := range g.Specs {
		ts, ok := s.(*ast.TypeSpec)
		if !ok || !ts.Name.IsExported() {
			continue
		}
		st := structOf(t, ts.Type, imports)
		if st == nil {
			continue
		}
		for _, f := range st.Fields.List {
			for _, n := range f.Names {
				if n.IsExported() {
					names = append(names, ts.Name.Name+"."+n.Name+" "+types.ExprString(f.Type))
				}
			}
			if len(f.Names) == 0 { // embedded
				if id := embeddedName(f.Type); id != "" && ast.IsExported(id) {
					names = append(names, ts.Name.Name+"."+id)
				}
			}
		}
	}
	return names
}

// structOf is the struct type typ is, or names in another of the module's
// packages; nil for any other type.
func structOf(t *testing.T, typ ast.Expr, imports map[string]string) *ast.StructType {
	t.Helper()
	switch typ := typ.(type) {
	case *ast.StructType:
		return typ
	case *ast.SelectorExpr:
		pkg, ok := typ.X.(*ast.Ident)
		if !ok {
			return nil
		}
		rel, ours := strings.CutPrefix(imports[pkg.Name], module)
		if !ours {
			return nil
		}
		for _, f := range parseDir(t, filepath.Join("..", "..", "..", rel)) {
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok {
					continue
				}
				for _, s := range g.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok && ts.Name.Name == typ.Sel.Name {
						st, _ := ts.Type.(*ast.StructType)
						return st
					}
				}
			}
		}
	}
	return nil
}

// embeddedName is the name an embedded field is known by.
func embeddedName(typ ast.Expr) string {
	switch typ := typ.(type) {
	case *ast.StarExpr:
		return embeddedName(typ.X)
	case *ast.Ident:
		return typ.Name
	case *ast.SelectorExpr:
		return typ.Sel.Name
	}
	return ""
}

func declNames(d ast.Decl) []string {
	var names []string
	switch d := d.(type) {
	case *ast.FuncDecl:
		if !d.Name.IsExported() {
			return nil
		}
		sig := " " + types.ExprString(d.Type)
		if d.Recv == nil {
			return []string{d.Name.Name + sig}
		}
		typ := d.Recv.List[0].Type
		if star, ok := typ.(*ast.StarExpr); ok {
			typ = star.X
		}
		if id, ok := typ.(*ast.Ident); ok && id.IsExported() {
			return []string{id.Name + "." + d.Name.Name + sig}
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
