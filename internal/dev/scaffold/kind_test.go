package scaffold

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stencil-operator/stencil/internal/testing/testkind"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
	"github.com/stencil-operator/stencil/internal/testing/testutil"
	"github.com/stencil-operator/stencil/render"
)

// TestScaffoldedKindBuildsAndRenders scaffolds a kind in a copy of the
// repository, as `make kind` does, and checks that the copy then passes
// `make generate manifests`, go vet of its API types and registration, and the golden test with the new kind's
// golden file written, with no hand edit. (`make test` on such a copy was
// run by hand; it takes as long as the whole suite.)
func TestScaffoldedKindBuildsAndRenders(t *testing.T) {
	root := copyRepository(t)
	k, err := newKind("scaffoldtest.example.com", "v1alpha1", "Policy") // a group no one scaffolds; a plural that is not +s
	if err != nil {
		t.Fatal(err)
	}
	k.Module = "github.com/stencil-operator/stencil"
	if err := scaffold(root, k); err != nil {
		t.Fatal(err)
	}
	if err := scaffold(root, k); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("a second scaffold of the same kind: %v, want a refusal", err)
	}
	run(t, root, "make", "generate", "manifests")
	run(t, root, "go", "vet", "./api/...", "./templates/...")
	run(t, root, "go", "run", ".", "test", "--templates", "templates", "--update", "policy")
	// TestHostileValues renders only chart kinds, none of them the new
	// one, for about 40 s of CPU: the checkout's own run covers it.
	out := run(t, root, "go", "test", "-count=1", "-skip", "^TestHostileValues$", "./render", "./internal/dev/chart")
	t.Logf("%s", out)
	for _, path := range []string{"templates/policy/tests/sample/expected.yaml", "config/crd/bases/scaffoldtest.example.com_policies.yaml", "dist/chart/crds/policies.scaffoldtest.example.com.yaml"} {
		if _, err := os.Stat(filepath.Join(root, path)); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
	if role, _ := os.ReadFile(filepath.Join(root, "config/rbac/role.yaml")); !strings.Contains(string(role), "scaffoldtest.example.com") {
		t.Errorf("config/rbac/role.yaml does not cover the new kind")
	}
}

// TestScaffoldedTemplateQuotesNames renders the scaffold's ConfigMap
// template for the test kind (which has its spec.message) with names YAML
// reads as a number, a boolean or null when printed bare: they arrive as
// the strings they are.
func TestScaffoldedTemplateQuotesNames(t *testing.T) {
	def := testkind.Widget()
	def.Templates = fstest.MapFS{
		"_kind.yaml":     {Data: []byte("owns: [{apiVersion: v1, kind: ConfigMap}]")},
		"configmap.yaml": {Data: mustRead(t, "newkind/configmap.yaml.tmpl")},
	}
	kind, err := render.Load(def)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"123", "1e3", "on", "yes", "null", "true"} {
		cr := &testv1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Name: s, Namespace: s, UID: "uid-1"}, Spec: testv1alpha1.WidgetSpec{Message: s}}
		objs, err := kind.Render(cr)
		if err != nil {
			t.Errorf("a resource named %s: %v", s, err)
			continue
		}
		if message := objs[0].Object["data"].(map[string]any)["message"]; objs[0].GetName() != s || message != s {
			t.Errorf("a resource named %s renders name %q, message %#v", s, objs[0].GetName(), message)
		}
	}
}

func TestRefusesTheTestKindsFolders(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "internal", "testing", "testkind", "templates", "widget"), 0o755); err != nil {
		t.Fatal(err)
	}
	k, _ := newKind("widgets.example.com", "v1", "Widget")
	if err := scaffold(root, k); err == nil || !strings.Contains(err.Error(), "internal/testing/testkind/templates/widget exists") {
		t.Errorf("scaffold of a Widget: %v, want a refusal (widget is the test kind's folder)", err)
	}
}

func TestNewKindRefusesBadNames(t *testing.T) {
	for _, tt := range [][3]string{
		{"gadgets", "v1", "Gadget"},             // no dot
		{"gadgets.example.com", "1", "Gadget"},  // not a version
		{"gadgets.example.com", "v1", "gadget"}, // not CamelCase
		{"Gadgets.example.com", "v1", "Gadget"}, // upper case
		{"gadgets.example.com", "v1beta", "Gadget"},
		{"3d.example.com", "v1", "Gadget"},            // no Go package name
		{"gadgets.example.com", "v1", "GroupVersion"}, // declared by doc.go
	} {
		if _, err := newKind(tt[0], tt[1], tt[2]); err == nil {
			t.Errorf("newKind%v: no error", tt)
		}
	}
}

// copyRepository copies the repository's tracked and new files (not bin/,
// whose tools `make` links again from their cache) into a temporary folder.
func copyRepository(t *testing.T) string {
	t.Helper()
	src, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	files := run(t, src, "git", "ls-files", "--cached", "--others", "--exclude-standard")
	dst := t.TempDir()
	for f := range strings.SplitSeq(strings.TrimSpace(files), "\n") {
		data, err := os.ReadFile(filepath.Join(src, f))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the work tree
		}
		if err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), data, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	// -trimpath: the copy's packages are those of the checkout, byte for
	// byte, but in another folder; without it Go builds every one again.
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "GOFLAGS=-trimpath")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestAddVersion: create version refuses what it cannot do, and writes
// nothing then (a kind not registered, its version already, a package of
// several kinds, a new version's package that exists); it finds an entry
// written over several lines, in a file with CRLF line ends.
func TestAddVersion(t *testing.T) {
	root := t.TempDir()
	if err := Init(root, Options{Module: "example.com/widgets", StencilVersion: "v0.1.0"}); err != nil {
		t.Fatal(err)
	}
	if _, err := AddKind(root, "widgets.example.com", "v1alpha1", "Widget"); err != nil {
		t.Fatal(err)
	}
	gadget := filepath.Join(root, "api", "widgets", "v1alpha1", "gadget_types.go")
	refusals := []struct {
		name, kind, version, want string
		setUp, tearDown           func()
	}{
		{name: "bad version", kind: "Widget", version: "v1beta", want: `version "v1beta": want v1, v1alpha1, v2beta3…`},
		{name: "unregistered", kind: "Gadget", version: "v1", want: "templates/kinds.go registers no kind Gadget (make kind adds one)"},
		{name: "same version", kind: "Widget", version: "v1alpha1", want: "kind Widget is registered at v1alpha1 already"},
		{name: "package of two kinds", kind: "Widget", version: "v1", want: "api/widgets/v1alpha1 declares other kinds too (Gadget, GadgetList)",
			setUp: func() {
				writeTestFile(t, gadget, "package v1alpha1\n\n// +kubebuilder:object:root=true\ntype Gadget struct{}\n\n// +kubebuilder:object:root=true\ntype GadgetList struct{}\n")
			},
			tearDown: func() { _ = os.Remove(gadget) }},
		{name: "new package exists", kind: "Widget", version: "v1", want: "api/widgets/v1 exists",
			setUp:    func() { _ = os.MkdirAll(filepath.Join(root, "api", "widgets", "v1"), 0o755) },
			tearDown: func() { _ = os.RemoveAll(filepath.Join(root, "api", "widgets", "v1")) }},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			if tt.setUp != nil {
				tt.setUp()
				defer tt.tearDown()
			}
			before := testutil.Files(t, root)
			if _, err := AddVersion(root, tt.kind, tt.version); err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("AddVersion(%s, %s): %v, want an error beginning %q", tt.kind, tt.version, err, tt.want)
			}
			if after := testutil.Files(t, root); !maps.Equal(before, after) {
				t.Errorf("a refused AddVersion changed the project")
			}
		})
	}

	kindsGo := filepath.Join(root, "templates", "kinds.go")
	src, err := os.ReadFile(kindsGo)
	if err != nil {
		t.Fatal(err)
	}
	split := strings.ReplaceAll(string(src), ", AddToScheme:", ",\n\t\tAddToScheme:")
	writeTestFile(t, kindsGo, strings.ReplaceAll(split, "\n", "\r\n"))
	old, err := AddVersion(root, "Widget", "v1")
	if err != nil || old != "v1alpha1" {
		t.Fatalf("AddVersion over a multi-line CRLF entry: %q, %v", old, err)
	}
	got, err := os.ReadFile(kindsGo)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`widgetsv1 "example.com/widgets/api/widgets/v1"`, "widgetsv1.GroupVersion.WithKind(\"Widget\")", "AddToScheme: widgetsv1.AddToScheme"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("templates/kinds.go has no %s:\n%s", want, got)
		}
	}
	if strings.Contains(string(got), "widgetsv1alpha1") {
		t.Errorf("templates/kinds.go still imports v1alpha1, which nothing uses:\n%s", got)
	}
}

// TestRenameLeavesNoStencilName: every deployment file a project gets
// (config/) names the project's operator, not stencil: its webhook
// Service and certificate Secret too, which the CRDs of a kind with
// several versions and the operator's flags name <name>-webhook and
// <name>-webhook-cert.
func TestRenameLeavesNoStencilName(t *testing.T) {
	root := t.TempDir()
	if err := Init(root, Options{Module: "example.com/widgets", StencilVersion: "v0.1.0"}); err != nil {
		t.Fatal(err)
	}
	stencilName := regexp.MustCompile(`\bstencil-[a-z-]+`)
	err := filepath.WalkDir(filepath.Join(root, "config"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range stencilName.FindAllString(string(data), -1) {
			// The user extra key stencil's writes carry, and a policy
			// rule about it, are the same for every operator.
			if !slices.Contains([]string{"stencil-operator", "stencil-tools", "stencil-writer", "stencil-as-a-tenant"}, m) {
				t.Errorf("%s names %s", p, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "config", "manager", "manager.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "name: widgets-webhook\n") {
		t.Errorf("config/manager/manager.yaml has no Service widgets-webhook")
	}
}

// TestProjectToolsAreStencils: a project's tool modules (hack/tools, which
// stencil init writes) are stencil's own, byte for byte, so that a machine
// that built stencil's tools builds none for a project (the cache is keyed
// by the modules' content), and a project's make tools builds helm, which
// import chart --verify runs.
func TestProjectToolsAreStencils(t *testing.T) {
	files, err := filepath.Glob("project/hack/tools/*/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no tool module files: %v", err)
	}
	modules := map[string]bool{}
	for _, f := range files {
		module := filepath.Base(filepath.Dir(f))
		modules[module] = true
		want, err := os.ReadFile(filepath.Join("..", "..", "..", "hack", "tools", module, strings.TrimSuffix(filepath.Base(f), ".txt")))
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(f); string(got) != string(want) {
			t.Errorf("%s differs from stencil's hack/tools/%s", f, module)
		}
	}
	if !modules["helm"] {
		t.Errorf("a project's tools build no helm (modules %v)", slices.Sorted(maps.Keys(modules)))
	}
}

// mustRead is the scaffold's embedded file name.
func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	data, err := newKindFiles.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
