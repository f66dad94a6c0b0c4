package scaffold

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/stencil-operator/stencil/config"
	"github.com/stencil-operator/stencil/internal/operator/kinds"
)

// project is the skeleton of a project: files ending in .tmpl are Go
// templates ([[ ]] delimiters, filled with Options), files ending in .txt
// are copied as they are (stencil's own tool modules, which the Go tool
// would otherwise take for modules or packages of this one).
//
//go:embed all:project
var project embed.FS

// Options say what project Init writes.
type Options struct {
	// Module is the project's Go module path, e.g. example.com/widgets.
	Module string
	// Name is the operator's name: its binary, namespace (<name>-system),
	// ClusterRole and Lease. Default: the module path's last element.
	Name string
	// Domain is the default suffix of its kinds' API groups, e.g.
	// example.com. Default: the module path's first element.
	Domain string
	// StencilVersion is the version of stencil the project requires.
	StencilVersion string
	// Replace, when set, is a stencil checkout the project's go.mod points
	// at (a replace directive): developing stencil itself.
	Replace string
}

var moduleRE = regexp.MustCompile(`^[a-z0-9][-a-z0-9_.~]*(/[A-Za-z0-9][-A-Za-z0-9_.~]*)*$`)

// defaults fills in Name and Domain and checks every field.
func (o *Options) defaults() error {
	if !moduleRE.MatchString(o.Module) {
		return fmt.Errorf("module %q: want a Go module path such as example.com/widgets", o.Module)
	}
	if o.Name == "" {
		o.Name = strings.ToLower(path.Base(o.Module))
	}
	if errs := validation.IsDNS1123Label(o.Name); len(errs) > 0 {
		return fmt.Errorf("name %q: it names the operator's namespace (%s-system): %s; set --name", o.Name, o.Name, strings.Join(errs, "; "))
	}
	if o.Domain == "" {
		o.Domain = strings.Split(o.Module, "/")[0]
	}
	if !strings.Contains(o.Domain, ".") {
		return fmt.Errorf("domain %q: want a DNS name with a dot, such as example.com; set --domain", o.Domain)
	}
	if o.StencilVersion == "" {
		return errors.New("no stencil version to require: this stencil is a development build; pass --stencil-checkout with the stencil checkout it was built from")
	}
	return nil
}

// Init writes a new project into dir, which must be empty (a .git folder
// may be there): its go.mod, main.go, templates/, config/, Makefile,
// Dockerfile, .ci/run, README.md, smoke test and pinned tools. It has no
// kind yet: AddKind adds one. The caller runs `go mod tidy` after it.
func Init(dir string, o Options) error {
	if err := o.defaults(); err != nil {
		return err
	}
	if err := checkEmpty(dir); err != nil {
		return err
	}
	if err := writeSkeleton(dir, o); err != nil {
		return err
	}
	if err := writeConfig(dir, o.Name); err != nil {
		return err
	}
	for _, d := range []string{"api", "config/samples"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	return nil
}

func checkEmpty(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() != ".git" {
			return fmt.Errorf("%s is not empty (it holds %s): stencil init writes a new project into an empty folder", dir, e.Name())
		}
	}
	return nil
}

// writeSkeleton writes the files of the embedded project folder.
func writeSkeleton(dir string, o Options) error {
	return fs.WalkDir(project, "project", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := project.ReadFile(p)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p, "project/")
		switch {
		case strings.HasSuffix(rel, ".tmpl"):
			rel = strings.TrimSuffix(rel, ".tmpl")
			var b bytes.Buffer
			if err := template.Must(template.New(rel).Delims("[[", "]]").Parse(string(data))).Execute(&b, o); err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
			data = b.Bytes()
		case strings.HasSuffix(rel, ".txt"):
			rel = strings.TrimSuffix(rel, ".txt")
		}
		if rel == "gitignore" {
			rel = ".gitignore"
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(rel, ".sh") || rel == ".ci/run" {
			mode = 0o755
		}
		return writeFile(filepath.Join(dir, rel), data, mode)
	})
}

// writeConfig writes config/: stencil's deployment files with the
// project's name, and the generated ClusterRole and graph deletion policy
// of a project with no kind yet (`make manifests` writes them again).
func writeConfig(dir, name string) error {
	err := fs.WalkDir(config.Project, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := config.Project.ReadFile(p)
		if err != nil {
			return err
		}
		return writeFile(filepath.Join(dir, "config", p), Rename(data, name), 0o644)
	})
	if err != nil {
		return err
	}
	set := kinds.Set{Name: name}
	role, err := set.ClusterRoleYAML()
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, "config", "rbac", "role.yaml"), role, 0o644); err != nil {
		return err
	}
	policy, err := kinds.GraphDeletionPolicyYAML(name, nil, nil)
	if err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, "config", "policy", "graph_deletion.yaml"), policy, 0o644)
}

// renames turn stencil's names in its deployment files into a project's:
// its namespace, ServiceAccount, Deployment, image and cluster-wide
// objects. stencil's label and annotation keys (stencil.dev/…) stay.
var renames = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\bstencil-(system|manager|metrics|leader-election|control-keys|graph-deletion|webhook-cert|webhook)\b`), "${name}-$1"},
	{regexp.MustCompile(`(?m)((?:^|\s)(?:name|serviceAccountName|app\.kubernetes\.io/name): )stencil$`), "${1}${name}"},
	{regexp.MustCompile(`image: stencil:latest`), "image: ${name}:latest"},
	{regexp.MustCompile(`prometheus-stencil\b`), "prometheus-${name}"},
	// stencil's sample decorators, which a project does not have.
	{regexp.MustCompile(`(?m)^ *# Decorators run only when named here, e\.g\. seed 004[^\n]*\n( *#[^\n]*\n)*?( *# - --decorator-namespace-selector[^\n]*\n)`), "        # Decorators (templates/kinds.go) run only when named here: --decorators=<name>,…\n"},
}

// Rename is data, one of stencil's deployment files, with the names of
// the operator called name.
func Rename(data []byte, name string) []byte {
	for _, r := range renames {
		data = r.re.ReplaceAll(data, []byte(strings.ReplaceAll(r.with, "${name}", name)))
	}
	return data
}

func writeFile(p string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, data, mode)
}
