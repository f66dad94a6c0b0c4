package chartimport

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// importedFile, in a chart kind's folder, lists the files the import
// wrote (paths under the project's root): a later import of the chart's
// next version replaces them and removes those it no longer writes; the
// project's own files beside them (a template or test case added by hand)
// are kept.
const importedFile = "_import.txt"

// Upgrade is what an import over a kind an earlier import made changed.
type Upgrade struct {
	// From and To are the chart's versions, before and now.
	From, To string
	// Added, Changed and Removed are files under the project's root.
	Added, Changed, Removed []string
	// Own are the project's files in the kind's folder that no import
	// wrote: kept as they are.
	Own []string
	// Declared are the project's own declarations in _kind.yaml, kept.
	Declared []string
	// Values are the chart's values added (+), removed (-) or whose
	// default changed (~), by dotted path.
	Values []string
}

// Schema reports whether the kind's CRD changes: its values (each is a
// default in the CRD) or their schema changed. make generate manifests
// writes it.
func (u *Upgrade) Schema(lower string) bool {
	return len(u.Values) > 0 || slices.ContainsFunc(slices.Concat(u.Added, u.Changed, u.Removed), func(p string) bool {
		return strings.HasPrefix(p, filepath.Join("templates", lower, "_values.schema.json"))
	})
}

// declaredMark starts, in the import list, the _kind.yaml the import
// declared, each line after it: a later import tells the project's own
// declarations from it.
const declaredMark = "#| "

// withImportList adds to files (by path under the root) the list of them,
// in the kind's folder, and the declaration decl the import made.
func withImportList(files map[string][]byte, lower, chart string, decl []byte) {
	paths := slices.Sorted(maps.Keys(files))
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Written by stencil import chart (%s). Importing the chart's next version replaces\n# these files and removes those it no longer writes; other files here are kept.\n", chart)
	for _, p := range paths {
		b.WriteString(filepath.ToSlash(p) + "\n")
	}
	b.WriteString("# The _kind.yaml it declared (what differs in _kind.yaml is the project's own):\n")
	for line := range strings.Lines(string(decl)) {
		b.WriteString(declaredMark + line)
	}
	files[filepath.Join("templates", lower, importedFile)] = b.Bytes()
}

// upgrade writes files over the kind in templates/lower that an earlier
// import made: it keeps the project's own files in the folder and its own
// declarations in _kind.yaml, removes the earlier import's files that this
// one does not write, and says what changed.
func upgrade(root, lower string, files map[string][]byte) (*Upgrade, error) {
	folder := filepath.Join("templates", lower)
	u := &Upgrade{}
	before, declared, err := readImportList(root, lower)
	if err != nil {
		return nil, err
	}
	if err := u.compare(root, folder, files, declared); err != nil {
		return nil, err
	}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		old, err := os.ReadFile(filepath.Join(root, p))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			u.Added = append(u.Added, p)
		case err != nil:
			return nil, err
		case !bytes.Equal(old, files[p]):
			u.Changed = append(u.Changed, p)
		default:
			continue
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(root, p), files[p], 0o644); err != nil {
			return nil, err
		}
	}
	for _, p := range before {
		if _, writes := files[p]; writes {
			continue
		}
		if err := removeFile(root, p); err != nil {
			return nil, err
		}
		u.Removed = append(u.Removed, p)
	}
	return u, u.findOwn(root, folder, files, before)
}

// removeFile removes the file p under root, through os.Root: never a file
// a symbolic link leads out of the project to.
func removeFile(root, p string) error {
	r, err := os.OpenRoot(root)
	if err != nil {
		return err
	}
	defer func() { _ = r.Close() }()
	if err := r.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// compare reads what the earlier import wrote that this one says it
// changed: the chart's version and values, and the project's own
// declarations in _kind.yaml, which it merges into files'.
func (u *Upgrade) compare(root, folder string, files map[string][]byte, declared []byte) error {
	read := func(name string) []byte {
		data, _ := os.ReadFile(filepath.Join(root, folder, name))
		return data
	}
	u.From, u.To = chartVersion(read("_chart.yaml")), chartVersion(files[filepath.Join(folder, "_chart.yaml")])
	var err error
	if u.Values, err = valueChanges(read("_values.yaml"), files[filepath.Join(folder, "_values.yaml")]); err != nil {
		return err
	}
	decl := filepath.Join(folder, "_kind.yaml")
	merged, kept, err := mergeDeclaration(declared, read("_kind.yaml"), files[decl])
	if err != nil {
		return fmt.Errorf("%s: %w", decl, err)
	}
	files[decl], u.Declared = merged, kept
	return nil
}

// findOwn lists the files of the folder that neither import wrote.
func (u *Upgrade) findOwn(root, folder string, files map[string][]byte, before []string) error {
	return filepath.WalkDir(filepath.Join(root, folder), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		if _, writes := files[rel]; !writes && !slices.Contains(before, rel) {
			u.Own = append(u.Own, rel)
		}
		return nil
	})
}

// readImportList reads the files an earlier import listed in the kind's
// folder, and the declaration it made; none when it listed none (an import
// before the list was kept: its files that this one does not write stay,
// and are counted as the project's). It lists only what an import writes
// (the folder's files, the samples): a path elsewhere is an error, never a
// file removed.
func readImportList(root, lower string) ([]string, []byte, error) {
	folder := filepath.Join("templates", lower)
	data, err := os.ReadFile(filepath.Join(root, folder, importedFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var out []string
	var declared strings.Builder
	for line := range strings.Lines(string(data)) {
		if decl, ok := strings.CutPrefix(line, declaredMark); ok {
			declared.WriteString(decl)
			continue
		}
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		p := filepath.Clean(filepath.FromSlash(line))
		if !importWrites(p, lower) {
			return nil, nil, fmt.Errorf("%s lists %q, which no import writes", filepath.Join(folder, importedFile), line)
		}
		out = append(out, p)
	}
	return out, []byte(declared.String()), nil
}

// importWrites: p (clean, under the root) is a file an import of the kind
// lower writes: in its folder, or one of its samples.
func importWrites(p, lower string) bool {
	folder := filepath.Join("templates", lower) + string(filepath.Separator)
	return filepath.IsLocal(p) && strings.HasPrefix(p, folder) ||
		p == filepath.Join("config", "samples", lower+".yaml") || p == filepath.Join("config", "samples", "full", lower+".yaml")
}

func chartVersion(chart []byte) string {
	var c struct {
		Version string `json:"version"`
	}
	_ = yaml.Unmarshal(chart, &c)
	return c.Version
}

// valueChanges lists the values (leaves, by dotted path) added, removed or
// whose default changed between two values files.
func valueChanges(before, after []byte) ([]string, error) {
	var b, a map[string]any
	if err := yaml.Unmarshal(before, &b); err != nil {
		return nil, fmt.Errorf("the earlier import's _values.yaml: %w", err)
	}
	if err := yaml.Unmarshal(after, &a); err != nil {
		return nil, fmt.Errorf("_values.yaml: %w", err)
	}
	old, now := map[string]any{}, map[string]any{}
	leaves("", b, old)
	leaves("", a, now)
	var out []string
	for _, p := range slices.Sorted(maps.Keys(now)) {
		prev, had := old[p]
		switch {
		case !had:
			out = append(out, fmt.Sprintf("+ %s (default %s)", p, short(now[p])))
		case !reflect.DeepEqual(prev, now[p]):
			out = append(out, fmt.Sprintf("~ %s: default %s, was %s", p, short(now[p]), short(prev)))
		}
	}
	for _, p := range slices.Sorted(maps.Keys(old)) {
		if _, has := now[p]; !has {
			out = append(out, "- "+p)
		}
	}
	return out, nil
}

// leaves puts every leaf of v (a list is one) under its dotted path.
func leaves(prefix string, v any, out map[string]any) {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		if prefix != "" {
			out[prefix] = v
		}
		return
	}
	for k, child := range m {
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		leaves(path, child, out)
	}
}

// short is v as JSON, cut at 40 characters.
func short(v any) string {
	data, _ := yaml.Marshal(v)
	s := strings.TrimSpace(string(data))
	if len(s) > 40 {
		s = s[:37] + "..."
	}
	return strings.ReplaceAll(s, "\n", " ")
}

// mergeDeclaration is the _kind.yaml the import declares now, with what
// the project declared in its own (mine) beside what the earlier import
// declared (base): a top-level field (tpl, health, ...) it added or
// changed, an owned type and a graph node it added or changed (where the
// chart's new declaration has it too). Without base (an import before it
// was kept), only the fields the import does not declare are the
// project's. It returns what it kept, and what of the project's it could
// not.
func mergeDeclaration(base, mine, now []byte) ([]byte, []string, error) {
	var b, m, n map[string]any
	if err := yaml.Unmarshal(mine, &m); err != nil {
		return nil, nil, fmt.Errorf("the project's: %w", err)
	}
	if m == nil {
		return now, nil, nil
	}
	if err := yaml.Unmarshal(now, &n); err != nil {
		return nil, nil, err
	}
	_ = yaml.Unmarshal(base, &b)
	var kept []string
	for _, key := range slices.Sorted(maps.Keys(m)) {
		_, declared := n[key]
		switch {
		case key == "owns" && b != nil:
			n[key] = mergeOwns(asList(b[key]), asList(m[key]), asList(n[key]), &kept)
		case key == "graph" && b != nil:
			n[key] = mergeNodes(asMap(b[key]), asMap(m[key]), asMap(n[key]), &kept)
		case key == "owns" || key == "graph":
		case b != nil && !reflect.DeepEqual(m[key], b[key]) || b == nil && !declared:
			n[key] = m[key]
			kept = append(kept, key)
		}
	}
	if len(kept) == 0 {
		return now, nil, nil
	}
	out, err := yaml.Marshal(n)
	return out, kept, err
}

// mergeOwns is the owned types now declares, with those mine added to
// base's, and mine's form of those it changed.
func mergeOwns(base, mine, now []any, kept *[]string) []any {
	index := func(list []any, t any) int {
		return slices.IndexFunc(list, func(o any) bool { return sameType(o, t) })
	}
	for _, t := range mine {
		i, at := index(base, t), index(now, t)
		switch {
		case i < 0 && at < 0:
			now = append(now, t)
			*kept = append(*kept, "owns "+typeName(t))
		case i >= 0 && at >= 0 && !reflect.DeepEqual(t, base[i]):
			now[at] = t
			*kept = append(*kept, "owns "+typeName(t)+" as the project declared it")
		}
	}
	return now
}

// mergeNodes is the graph now declares, with the nodes mine added to
// base's or changed, where now has them.
func mergeNodes(base, mine, now map[string]any, kept *[]string) map[string]any {
	if now == nil {
		now = map[string]any{}
	}
	for _, name := range slices.Sorted(maps.Keys(mine)) {
		node, before := mine[name], base[name]
		_, inBase := base[name]
		_, has := now[name]
		switch {
		case !inBase && !has:
			now[name] = node
			*kept = append(*kept, "graph node "+name)
		case inBase && !reflect.DeepEqual(node, before) && has:
			now[name] = node
			*kept = append(*kept, "graph node "+name+" as the project declared it")
		case inBase && !reflect.DeepEqual(node, before):
			*kept = append(*kept, "not graph node "+name+": its template is gone with the chart's new version")
		}
	}
	if len(now) == 0 {
		return nil
	}
	return now
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func sameType(a, b any) bool { return typeName(a) == typeName(b) }

func typeName(t any) string {
	m, _ := t.(map[string]any)
	return fmt.Sprintf("%v %v", m["apiVersion"], m["kind"])
}
