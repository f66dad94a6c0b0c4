package scaffold

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"go/format"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/template"

	"github.com/stencil-operator/stencil/render"
)

// kind is what the templates of a kind's scaffold are filled with.
type kind struct {
	Group, Version, Kind string
	// Package is the Go package's folder under api/ (the group's first
	// label), Alias its import name in templates/kinds.go, Lower the kind
	// in lower case (its template folder), Plural its resource.
	Package, Alias, Lower, Plural string
	// Module is the project's Go module path.
	Module string
}

// AddKind adds a kind to the project at root (stencil's repository, or one
// made by Init): its API types, a folder of templates, a sample and a full
// sample, a first template test, and the lines that register it
// (templates/kinds.go, templates/doc.go). It changes nothing
// when the kind, its folder or its API package exist already. It returns
// the kind's lower-case name (its folder under templates/).
func AddKind(root, group, version, name string) (string, error) {
	k, err := newKind(group, version, name)
	if err != nil {
		return "", err
	}
	if k.Module, err = modulePath(root); err != nil {
		return "", err
	}
	return k.Lower, scaffold(root, k)
}

// modulePath is the module path that root's go.mod declares.
func modulePath(root string) (string, error) {
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", fmt.Errorf("reading the project's go.mod (run in the project's root): %w", err)
	}
	m := regexp.MustCompile(`(?m)^module\s+(\S+)`).FindSubmatch(data)
	if m == nil {
		return "", errors.New("go.mod declares no module")
	}
	return string(m[1]), nil
}

var (
	groupRE   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$`)
	versionRE = regexp.MustCompile(`^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$`)
	kindRE    = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
)

func newKind(group, version, name string) (kind, error) {
	switch {
	case !groupRE.MatchString(group):
		return kind{}, fmt.Errorf("group %q: want a DNS name with a dot, such as gadgets.example.com", group)
	case !versionRE.MatchString(version):
		return kind{}, fmt.Errorf("version %q: want v1, v1alpha1, v2beta3…", version)
	case !kindRE.MatchString(name):
		return kind{}, fmt.Errorf("kind %q: want CamelCase, such as Gadget", name)
	}
	pkg := strings.ReplaceAll(strings.Split(group, ".")[0], "-", "")
	switch {
	case !packageRE.MatchString(pkg):
		return kind{}, fmt.Errorf("group %q: its first label %q must start with a letter, to name the Go package api/%s", group, pkg, pkg)
	case reservedKinds[name]:
		return kind{}, fmt.Errorf("kind %q: the API package already declares that name", name)
	}
	return kind{Group: group, Version: version, Kind: name, Package: pkg, Alias: pkg + version, Lower: strings.ToLower(name), Plural: render.Plural(name)}, nil
}

var packageRE = regexp.MustCompile(`^[a-z][a-z0-9]*$`)

// reservedKinds are names doc.go declares in the kind's package.
var reservedKinds = map[string]bool{"GroupVersion": true, "AddToScheme": true}

// scaffold writes the new files and edits the registrations; it changes
// nothing when the kind, its folder or its API package exist already.
func scaffold(root string, k kind) error {
	return scaffoldFiles(root, k, map[string]string{
		filepath.Join("api", k.Package, k.Version, "doc.go"):                 "doc.go.tmpl",
		filepath.Join("api", k.Package, k.Version, k.Lower+"_types.go"):      "types.go.tmpl",
		filepath.Join("templates", k.Lower, "_kind.yaml"):                    "kind.yaml.tmpl",
		filepath.Join("templates", k.Lower, "configmap.yaml"):                "configmap.yaml.tmpl",
		filepath.Join("config", "samples", k.Lower+".yaml"):                  "sample.yaml.tmpl",
		filepath.Join("config", "samples", "full", k.Lower+".yaml"):          "full-sample.yaml.tmpl",
		filepath.Join("templates", k.Lower, "tests", "sample", "input.yaml"): "test-input.yaml.tmpl",
	}, nil)
}

// AddChartKind is AddKind for a kind made from a Helm chart (`stencil
// import chart`): its spec is the chart's values ([v1alpha1.Values]), and
// raw holds its other files by path under root (the template folder, the
// samples, the test cases).
// raw is called first, with the kind's folder name: when it fails, nothing
// is written.
func AddChartKind(root, group, version, name string, raw func(lower string) (map[string][]byte, error)) (string, error) {
	k, err := newKind(group, version, name)
	if err != nil {
		return "", err
	}
	if k.Module, err = modulePath(root); err != nil {
		return "", err
	}
	files, err := raw(k.Lower)
	if err != nil {
		return "", err
	}
	return k.Lower, scaffoldFiles(root, k, map[string]string{
		filepath.Join("api", k.Package, k.Version, "doc.go"):            "doc.go.tmpl",
		filepath.Join("api", k.Package, k.Version, k.Lower+"_types.go"): "chart_types.go.tmpl",
	}, files)
}

// ImportedChartKind reports whether the project at root has the kind (of
// group, version and name) a chart import made: its Go type, and a
// template folder with _chart.yaml. It returns the kind's folder name. A
// folder of that name that is not a chart kind's is an error: an import
// never replaces a kind written by hand.
func ImportedChartKind(root, group, version, name string) (string, bool, error) {
	k, err := newKind(group, version, name)
	if err != nil {
		return "", false, err
	}
	folder := filepath.Join(root, "templates", k.Lower)
	if _, err := os.Stat(folder); errors.Is(err, fs.ErrNotExist) {
		return k.Lower, false, nil
	} else if err != nil {
		return "", false, err
	}
	if _, err := os.Stat(filepath.Join(folder, "_chart.yaml")); err != nil {
		return "", false, fmt.Errorf("templates/%s exists and is not a kind a chart import made (no _chart.yaml): an import replaces only a chart's own kind", k.Lower)
	}
	types := filepath.Join("api", k.Package, k.Version, k.Lower+"_types.go")
	if _, err := os.Stat(filepath.Join(root, types)); err != nil {
		return "", false, fmt.Errorf("templates/%s is a chart kind's, but %s is not there: import it with the group and version it was imported with", k.Lower, types)
	}
	return k.Lower, true, nil
}

// scaffoldFiles writes files (by path: the template in newkind/ that makes
// it, filled with k) and raw (as they are) under root and edits the
// registrations.
func scaffoldFiles(root string, k kind, files map[string]string, raw map[string][]byte) error {
	if _, err := os.Stat(filepath.Join(root, "api", k.Package, k.Version)); err == nil {
		return fmt.Errorf("api/%s/%s exists: add a kind to an existing API package by hand (docs/add-kind.md)", k.Package, k.Version)
	}
	for _, dir := range []string{filepath.Join("templates", k.Lower), filepath.Join("internal", "testing", "testkind", "templates", k.Lower)} {
		if _, err := os.Stat(filepath.Join(root, dir)); err == nil {
			return fmt.Errorf("%s exists (another kind's, or the test kind's)", dir)
		}
	}
	for _, path := range append(slices.Collect(maps.Keys(files)), slices.Collect(maps.Keys(raw))...) {
		if _, err := os.Stat(filepath.Join(root, path)); err == nil {
			return fmt.Errorf("%s exists", path)
		}
	}
	edits, err := registrations(root, k)
	if err != nil {
		return err
	}
	for path, text := range files {
		if err := write(root, path, k, text); err != nil {
			return err
		}
	}
	for path, data := range raw {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, path)), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(root, path), data, 0o644); err != nil {
			return err
		}
	}
	for path, data := range edits {
		if err := os.WriteFile(filepath.Join(root, path), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// newKindFiles are the templates of a new kind's files (newkind/*.tmpl):
// Go templates with [[ ]] delimiters, filled with a kind.
//
//go:embed newkind
var newKindFiles embed.FS

// fill executes the template named name in newkind/file for k ("": the
// file itself).
func fill(file, name string, k kind) (string, error) {
	t, err := template.New(file).Delims("[[", "]]").ParseFS(newKindFiles, "newkind/"+file)
	if err != nil {
		return "", err
	}
	if name == "" {
		name = file
	}
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, name, k); err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	return b.String(), nil
}

// write writes path under root from the template newkind/file, filled
// with k.
func write(root, path string, k kind, file string) error {
	text, err := fill(file, "", k)
	if err != nil {
		return err
	}
	data := []byte(text)
	if strings.HasSuffix(path, ".go") {
		var err error
		if data, err = format.Source(data); err != nil {
			return fmt.Errorf("formatting %s: %w", path, err)
		}
	}
	full := filepath.Join(root, path)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return err
	}
	return os.WriteFile(full, data, 0o644)
}

// Markers in templates/kinds.go before which AddKind inserts a kind's
// lines.
const (
	importsMarker = "// +stencil:scaffold:imports"
	kindsMarker   = "// +stencil:scaffold:kinds"
)

// registrations are the edited templates/kinds.go and templates/doc.go
// (`stencil manifests` lists the kind's CRD in config/crd/kustomization.yaml).
func registrations(root string, k kind) (map[string][]byte, error) {
	out := map[string][]byte{}
	kindsGo := filepath.Join("templates", "kinds.go")
	src, err := os.ReadFile(filepath.Join(root, kindsGo))
	if err != nil {
		return nil, err
	}
	text := string(src)
	if strings.Contains(text, `WithKind("`+k.Kind+`")`) {
		return nil, fmt.Errorf("kind %s is registered already", k.Kind)
	}
	imports, err := fill("registration.tmpl", "import", k)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(text, `"github.com/stencil-operator/stencil/api/v1alpha1"`) {
		imports += "\t\"github.com/stencil-operator/stencil/api/v1alpha1\"\n"
	}
	entry, err := fill("registration.tmpl", "entry", k)
	if err != nil {
		return nil, err
	}
	steps := []struct{ marker, insert string }{{importsMarker, imports}, {kindsMarker, entry}}
	for _, s := range steps {
		i := strings.Index(text, s.marker)
		if i < 0 {
			return nil, fmt.Errorf("%s: no %q line to add the kind before", kindsGo, s.marker)
		}
		i = strings.LastIndex(text[:i], "\n") + 1 // the start of the marker's line
		text = text[:i] + s.insert + text[i:]
	}
	formatted, err := format.Source([]byte(text))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", kindsGo, err)
	}
	out[kindsGo] = formatted

	docGoPath := filepath.Join("templates", "doc.go")
	doc, err := os.ReadFile(filepath.Join(root, docGoPath))
	if err != nil {
		return nil, err
	}
	embed := regexp.MustCompile(`(?m)^//go:embed .*$`)
	switch {
	case embed.Match(doc):
		out[docGoPath] = embed.ReplaceAllFunc(doc, func(line []byte) []byte { return []byte(string(line) + " all:" + k.Lower) })
	case bytes.Contains(doc, []byte("\nvar folders embed.FS")):
		out[docGoPath] = bytes.Replace(doc, []byte("\nvar folders embed.FS"), []byte("\n//go:embed all:"+k.Lower+"\nvar folders embed.FS"), 1)
	default:
		return nil, errors.New("templates/doc.go: no //go:embed line, nor a var folders embed.FS to add one to")
	}

	return out, nil
}
