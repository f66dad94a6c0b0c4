// Package chartimport turns a Helm chart into a stencil kind (`stencil
// import chart`): the chart's templates, helpers, values and subcharts
// become the kind's folder, which the render package runs with Helm's
// objects (.Values, .Release, .Chart, .Capabilities, .Template, .Files);
// what cannot be carried over is said file by file; and the kind's render
// is checked against `helm template`, object by object.
package chartimport

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/ignore"

	"sigs.k8s.io/yaml"
)

// Chart is a chart read from its folder or archive: its files by path
// inside the chart (Chart.yaml, values.yaml, templates/…, charts/…).
type Chart struct {
	Name  string
	Files map[string][]byte
}

// Load reads a chart folder, or a .tgz archive of one (as `helm package`
// writes it: one top folder).
func Load(p string) (*Chart, error) {
	info, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	if info.IsDir() {
		if err = readDir(p, files); err == nil {
			err = helmIgnore(files)
		}
	} else {
		err = readArchive(p, files)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the chart %s: %w", p, err)
	}
	return newChart(files)
}

// helmIgnore removes from a chart folder's files what its .helmignore
// ignores, and the dotfiles under templates/, as Helm's loader does (with
// Helm's own rules: helm.sh/helm/v4/pkg/ignore), subcharts' files included.
// An archive holds what helm package kept: nothing is left out of one.
func helmIgnore(files map[string][]byte) error {
	rules := ignore.Empty()
	if data, ok := files[ignore.HelmIgnore]; ok {
		var err error
		if rules, err = ignore.Parse(bytes.NewReader(data)); err != nil {
			return fmt.Errorf("%s: %w", ignore.HelmIgnore, err)
		}
	}
	rules.AddDefaults()
	for _, name := range slices.Sorted(maps.Keys(files)) {
		// The values files of ci/ are the chart's test cases (as
		// chart-testing reads them from its folder), never its content:
		// kept when .helmignore leaves them out of the package.
		if ignored(rules, name) && !strings.HasPrefix(name, "ci/") {
			delete(files, name)
		}
	}
	return nil
}

// ignored: rules ignore the file name, or a folder it is in.
func ignored(rules *ignore.Rules, name string) bool {
	parts := strings.Split(name, "/")
	for i := range parts {
		if rules.Ignore(strings.Join(parts[:i+1], "/"), entryInfo{name: parts[i], dir: i < len(parts)-1}) {
			return true
		}
	}
	return false
}

// entryInfo is the os.FileInfo ignore.Rules reads of a chart's file or
// folder: its name and whether it is a folder.
type entryInfo struct {
	name string
	dir  bool
}

func (e entryInfo) Name() string { return e.name }
func (e entryInfo) Size() int64  { return 0 }
func (e entryInfo) Mode() fs.FileMode {
	if e.dir {
		return fs.ModeDir
	}
	return 0
}
func (e entryInfo) ModTime() time.Time { return time.Time{} }
func (e entryInfo) IsDir() bool        { return e.dir }
func (e entryInfo) Sys() any           { return nil }

func newChart(files map[string][]byte) (*Chart, error) {
	raw, ok := files["Chart.yaml"]
	if !ok {
		return nil, errors.New("no Chart.yaml: not a chart")
	}
	var meta struct {
		Name string `json:"name"`
	}
	if err := yaml.Unmarshal(raw, &meta); err != nil || meta.Name == "" {
		return nil, errors.Join(errors.New("no name in Chart.yaml"), err)
	}
	return &Chart{Name: meta.Name, Files: files}, nil
}

func readDir(root string, files map[string][]byte) error {
	return filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		files[filepath.ToSlash(rel)] = data
		return err
	})
}

// readArchive reads a chart archive, without its top folder.
func readArchive(p string, files map[string][]byte) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		name := path.Clean(h.Name)
		if _, rest, ok := strings.Cut(name, "/"); ok && !strings.HasPrefix(name, "..") {
			data, err := io.ReadAll(io.LimitReader(tr, 16<<20))
			if err != nil {
				return err
			}
			files[rest] = data
		}
	}
}

// Subcharts are the chart's subcharts under charts/, by folder name;
// archives there are opened.
func (c *Chart) Subcharts() (map[string]*Chart, error) {
	out := map[string]*Chart{}
	dirs := map[string]map[string][]byte{}
	for p, data := range c.Files {
		rest, ok := strings.CutPrefix(p, "charts/")
		if !ok {
			continue
		}
		dir, file, ok := strings.Cut(rest, "/")
		if !ok && strings.HasSuffix(rest, ".tgz") {
			sub, err := subchartArchive(rest, data)
			if err != nil {
				return nil, err
			}
			out[sub.Name] = sub
			continue
		}
		if ok {
			if dirs[dir] == nil {
				dirs[dir] = map[string][]byte{}
			}
			dirs[dir][file] = data
		}
	}
	for dir, files := range dirs {
		sub, err := newChart(files)
		if err != nil {
			return nil, fmt.Errorf("charts/%s: %w", dir, err)
		}
		out[sub.Name] = sub
	}
	return out, nil
}

func subchartArchive(name string, data []byte) (*Chart, error) {
	tmp, err := os.CreateTemp("", "subchart-*.tgz")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	sub, err := Load(tmp.Name())
	if err != nil {
		return nil, fmt.Errorf("charts/%s: %w", name, err)
	}
	return sub, nil
}

// ValuesFiles are the chart's values files that become the kind's test
// cases: values.yaml (the chart's defaults, as "default") and every
// *values.yaml under ci/ (as the file's name without .yaml), in name order.
func (c *Chart) ValuesFiles() []string {
	var out []string
	for p := range c.Files {
		if strings.HasPrefix(p, "ci/") && strings.HasSuffix(p, ".yaml") && !strings.Contains(strings.TrimPrefix(p, "ci/"), "/") {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return append([]string{"values.yaml"}, out...)
}
