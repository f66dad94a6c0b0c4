package scaffold

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// AddVersion gives the registered kind name (CamelCase) a new API version,
// as docs/evolve-api.md does by hand: api/<group>/<version>/ as a copy of
// the kind's current package, marked as the version the API server stores;
// the kind registered at the new version, its hub (templates/kinds.go);
// conversion templates between the two that copy the spec as it is
// (_from-<old>.yaml, _to-<old>.yaml, to edit as the versions part);
// ownerVersion: <old> in _kind.yaml, so that the objects the kind made keep
// their owner references; the samples and test inputs at the new version,
// and one test case kept at the old (tests/<old>/). It changes nothing when
// any of it exists already. It returns the kind's old version.
func AddVersion(root, name, version string) (string, error) {
	if !versionRE.MatchString(version) {
		return "", fmt.Errorf("version %q: want v1, v1alpha1, v2beta3…", version)
	}
	module, err := modulePath(root)
	if err != nil {
		return "", err
	}
	kindsGo, err := os.ReadFile(filepath.Join(root, "templates", "kinds.go"))
	if err != nil {
		return "", err
	}
	reg, err := findRegistration(string(kindsGo), module, name)
	if err != nil {
		return "", err
	}
	if reg.version == version {
		return "", fmt.Errorf("kind %s is registered at %s already", name, version)
	}
	v := newVersion{registration: reg, root: root, module: module, kind: name, lower: strings.ToLower(name), to: version}
	edits, err := v.files(string(kindsGo))
	if err != nil {
		return "", err
	}
	for path := range edits.created {
		if _, err := os.Stat(filepath.Join(root, path)); err == nil {
			return "", fmt.Errorf("%s exists", path)
		}
	}
	for path, data := range edits.all() {
		full := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			return "", err
		}
	}
	return reg.version, nil
}

// registration is where templates/kinds.go registers a kind: the import
// alias and path of its API package, its version, and the byte range of
// its entry.
type registration struct {
	alias, pkg, version string
	start, end          int // the kind's entry
	importStart         int // the line of its package's import
	importEnd           int
}

// findRegistration finds kind's entry in templates/kinds.go (one line or
// several) and the import of its API package.
func findRegistration(kindsGo, module, kind string) (registration, error) {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "kinds.go", kindsGo, parser.ParseComments)
	if err != nil {
		return registration{}, fmt.Errorf("templates/kinds.go: %w", err)
	}
	var reg registration
	found := false
	ast.Inspect(file, func(n ast.Node) bool {
		entry, ok := n.(*ast.CompositeLit)
		if !ok || found {
			return !found
		}
		if alias := entryKind(entry, kind); alias != "" {
			reg = registration{alias: alias, start: fset.Position(entry.Pos()).Offset, end: fset.Position(entry.End()).Offset}
			found = true
		}
		return true
	})
	if !found {
		return registration{}, fmt.Errorf("templates/kinds.go registers no kind %s (make kind adds one)", kind)
	}
	for _, imp := range file.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		name := path.Base(p)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		rest, ours := strings.CutPrefix(p, module+"/api/")
		if name != reg.alias || !ours || strings.Count(rest, "/") != 1 {
			continue
		}
		reg.pkg, reg.version, _ = strings.Cut(rest, "/")
		reg.importStart, reg.importEnd = fset.Position(imp.Pos()).Offset, fset.Position(imp.End()).Offset
		return reg, nil
	}
	return registration{}, fmt.Errorf("templates/kinds.go: kind %s's package %s is not imported from %s/api/<group>/<version>", kind, reg.alias, module)
}

// entryKind is the import alias of the package in entry's
// GroupVersionKind, <alias>.GroupVersion.WithKind("<kind>"), when entry
// registers kind ("" otherwise).
func entryKind(entry *ast.CompositeLit, kind string) string {
	for _, e := range entry.Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		if key, ok := kv.Key.(*ast.Ident); !ok || key.Name != "GroupVersionKind" {
			continue
		}
		call, ok := kv.Value.(*ast.CallExpr)
		if !ok || len(call.Args) != 1 {
			return ""
		}
		withKind, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || withKind.Sel.Name != "WithKind" {
			return ""
		}
		gv, ok := withKind.X.(*ast.SelectorExpr)
		if !ok || gv.Sel.Name != "GroupVersion" {
			return ""
		}
		alias, ok := gv.X.(*ast.Ident)
		lit, isLit := call.Args[0].(*ast.BasicLit)
		if !ok || !isLit || lit.Value != strconv.Quote(kind) {
			return ""
		}
		return alias.Name
	}
	return ""
}

// newVersion is one AddVersion: kind, registered as registration, gains
// version to.
type newVersion struct {
	registration
	root, module, kind, lower, to string
}

// edits are the files AddVersion writes: created (which must not exist)
// and changed.
type edits struct{ created, changed map[string][]byte }

func (e edits) all() map[string][]byte {
	out := map[string][]byte{}
	maps.Copy(out, e.created)
	maps.Copy(out, e.changed)
	return out
}

// files computes every file AddVersion writes.
func (v newVersion) files(kindsGo string) (edits, error) {
	e := edits{created: map[string][]byte{}, changed: map[string][]byte{}}
	steps := []func(edits) error{v.apiPackage, v.conversions, v.declaration, v.samples, v.testCases}
	for _, step := range steps {
		if err := step(e); err != nil {
			return edits{}, err
		}
	}
	registered, err := v.register(kindsGo)
	if err != nil {
		return edits{}, err
	}
	e.changed[filepath.Join("templates", "kinds.go")] = registered
	return e, nil
}

// storageMarker makes a version the one the API server stores.
const storageMarker = "// +kubebuilder:storageversion"

// apiPackage copies the old version's Go files (not the generated ones)
// into api/<pkg>/<to>, in package <to> at version <to>, the kind's type
// marked as stored; the old one's mark, if any, goes.
func (v newVersion) apiPackage(e edits) error {
	from := filepath.Join("api", v.pkg, v.version)
	files, err := filepath.Glob(filepath.Join(v.root, from, "*.go"))
	if err != nil {
		return err
	}
	to := filepath.Join("api", v.pkg, v.to)
	if _, err := os.Stat(filepath.Join(v.root, to)); err == nil {
		return fmt.Errorf("%s exists (another kind's version?): create version makes the package; add %s's %s types to it by hand (docs/evolve-api.md)", to, v.kind, v.to)
	}
	if others := otherKinds(v.root, from, v.kind); len(others) > 0 {
		return fmt.Errorf("%s declares other kinds too (%s): create version copies a package of one kind; give %s its %s by hand (docs/evolve-api.md)", from, strings.Join(others, ", "), v.kind, v.to)
	}
	typeLine := regexp.MustCompile(`(?m)^type ` + regexp.QuoteMeta(v.kind) + ` struct \{\r?$`)
	marked := false
	for _, f := range files {
		base := filepath.Base(f)
		if strings.HasPrefix(base, "zz_generated") || strings.HasSuffix(base, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		text := strings.ReplaceAll(string(src), "package "+v.version+"\n", "package "+v.to+"\n")
		text = strings.ReplaceAll(text, "// Package "+v.version+" ", "// Package "+v.to+" ")
		text = strings.ReplaceAll(text, `Version: "`+v.version+`"`, `Version: "`+v.to+`"`)
		text = strings.ReplaceAll(text, "/"+v.version+" API", "/"+v.to+" API")
		if old := strings.ReplaceAll(string(src), storageMarker+"\n", ""); old != string(src) {
			e.changed[filepath.Join(from, base)] = []byte(old)
			text = strings.ReplaceAll(text, storageMarker+"\n", "")
		}
		if loc := typeLine.FindStringIndex(text); loc != nil {
			text = text[:loc[0]] + storageMarker + "\n" + text[loc[0]:]
			marked = true
		}
		out, err := format.Source([]byte(text))
		if err != nil {
			return fmt.Errorf("%s: %w", base, err)
		}
		e.created[filepath.Join("api", v.pkg, v.to, base)] = out
	}
	if !marked {
		return fmt.Errorf("%s: no file declares type %s struct", from, v.kind)
	}
	return nil
}

// rootType is a type kubebuilder makes an API object of.
var rootType = regexp.MustCompile(`(?m)^// \+kubebuilder:object:root=true\r?\n(?://.*\n)*type (\w+) struct`)

// otherKinds are the API object types of the package in dir other than
// kind and its list.
func otherKinds(root, dir, kind string) []string {
	files, _ := filepath.Glob(filepath.Join(root, dir, "*.go"))
	var out []string
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, m := range rootType.FindAllSubmatch(src, -1) {
			if name := string(m[1]); name != kind && name != kind+"List" {
				out = append(out, name)
			}
		}
	}
	return out
}

// conversions writes the two conversion templates, which copy the spec.
func (v newVersion) conversions(e edits) error {
	dir := filepath.Join("templates", v.lower)
	for _, c := range []struct{ file, from, to string }{
		{"_from-" + v.version + ".yaml", v.version, v.to},
		{"_to-" + v.version + ".yaml", v.to, v.version},
	} {
		e.created[filepath.Join(dir, c.file)] = fmt.Appendf(nil, `{{- /*
  %[2]s from %[1]s: the dot is the %[1]s object as a map (.spec, .status,
  .metadata). It copies the spec as it is; write here what changed
  between the versions (docs/evolve-api.md). Read optional fields with
  index, hasKey or dig.
*/ -}}
spec:
  {{- toYaml .spec | nindent 2 }}
`, c.from, c.to)
	}
	return nil
}

// declaration adds ownerVersion: <old> to _kind.yaml, unless it has one.
func (v newVersion) declaration(e edits) error {
	path := filepath.Join("templates", v.lower, "_kind.yaml")
	data, err := os.ReadFile(filepath.Join(v.root, path))
	if err != nil {
		return err
	}
	if regexp.MustCompile(`(?m)^ownerVersion:`).Match(data) {
		return nil
	}
	if len(data) > 0 && !bytes.HasSuffix(data, []byte("\n")) {
		data = append(data, '\n')
	}
	e.changed[path] = fmt.Appendf(data, `# The objects this kind made name their owner at %[1]s: they keep it, so
# that the new version changes none of them (%[1]s must stay served).
ownerVersion: %[1]s
`, v.version)
	return nil
}

// atOldVersion says whether a resource's apiVersion is the kind's old
// version.
func (v newVersion) atOldVersion(data []byte) bool {
	return regexp.MustCompile(`(?m)^apiVersion: [^/\s]+/` + regexp.QuoteMeta(v.version) + `\s*$`).Match(data)
}

// atNewVersion is data with its apiVersion at the new version.
func (v newVersion) atNewVersion(data []byte) []byte {
	return regexp.MustCompile(`(?m)^(apiVersion: [^/\s]+/)`+regexp.QuoteMeta(v.version)+`(\s*)$`).ReplaceAll(data, []byte("${1}"+v.to+"${2}"))
}

// samples moves the kind's samples to the new version.
func (v newVersion) samples(e edits) error {
	for _, path := range []string{
		filepath.Join("config", "samples", v.lower+".yaml"),
		filepath.Join("config", "samples", "full", v.lower+".yaml"),
	} {
		data, err := os.ReadFile(filepath.Join(v.root, path))
		if os.IsNotExist(err) {
			continue
		} else if err != nil {
			return err
		}
		if v.atOldVersion(data) {
			e.changed[path] = v.atNewVersion(data)
		}
	}
	return nil
}

// testCases moves the test inputs to the new version, and keeps the
// first case at the old one, as tests/<old>/.
func (v newVersion) testCases(e edits) error {
	tests := filepath.Join("templates", v.lower, "tests")
	cases, err := os.ReadDir(filepath.Join(v.root, tests))
	if os.IsNotExist(err) {
		return nil
	} else if err != nil {
		return err
	}
	kept := false
	for _, c := range cases {
		input := filepath.Join(tests, c.Name(), "input.yaml")
		data, err := os.ReadFile(filepath.Join(v.root, input))
		if err != nil {
			continue // not a case with an input
		}
		if !v.atOldVersion(data) {
			continue
		}
		e.changed[input] = v.atNewVersion(data)
		if kept {
			continue
		}
		kept = true
		if err := v.keepCase(e, filepath.Join(tests, c.Name()), filepath.Join(tests, v.version)); err != nil {
			return err
		}
	}
	return nil
}

// keepCase copies the case in dir as it is into dst: its input stays at
// the old version, which the test converts to the hub first.
func (v newVersion) keepCase(e edits, dir, dst string) error {
	files, err := os.ReadDir(filepath.Join(v.root, dir))
	if err != nil {
		return err
	}
	for _, f := range files {
		if f.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(v.root, dir, f.Name()))
		if err != nil {
			return err
		}
		e.created[filepath.Join(dst, f.Name())] = data
	}
	return nil
}

// register points the kind's entry in templates/kinds.go at the new
// version's package, imported beside the old one (dropped when no other
// entry uses it).
func (v newVersion) register(kindsGo string) ([]byte, error) {
	alias := v.pkg + v.to
	entry := strings.ReplaceAll(kindsGo[v.start:v.end], v.alias+".", alias+".")
	rest := kindsGo[:v.start] + kindsGo[v.end:]
	newImport := alias + ` "` + v.module + "/api/" + v.pkg + "/" + v.to + `"`
	oldImport := kindsGo[v.importStart:v.importEnd]
	if strings.Contains(rest, v.alias+".") {
		newImport = oldImport + "\n\t" + newImport // still used by other kinds
	}
	text := kindsGo[:v.importStart] + newImport + kindsGo[v.importEnd:v.start] + entry + kindsGo[v.end:]
	out, err := format.Source([]byte(text))
	if err != nil {
		return nil, fmt.Errorf("templates/kinds.go: %w", err)
	}
	return out, nil
}
