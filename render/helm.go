package render

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"text/template"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/Masterminds/semver/v3"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// A chart kind is a kind made from a Helm chart (`stencil import chart`):
// its folder holds the chart's Chart.yaml as _chart.yaml and its
// values.yaml as _values.yaml, and its templates read Helm's objects
// rather than the custom resource: .Values (the spec over the chart's
// values, merged as Helm merges them), .Release, .Chart, .Capabilities,
// .Template and .Files. Like Helm, a missing key is empty ("<no value>"
// is written as nothing), where other kinds' templates fail on one.
const (
	chartFile  = "_chart.yaml"
	valuesFile = "_values.yaml"
	// filesDir holds the chart's files outside templates/, which .Files
	// reads.
	filesDir = "_files"
)

// ReleaseService is .Release.Service: what Helm calls itself there.
const ReleaseService = "stencil"

// DefaultKubeVersion is .Capabilities.KubeVersion offline: the version of
// the control plane stencil is tested on. Live, it is the cluster's (see
// [Kind.WithKubeVersion]).
const DefaultKubeVersion = "v1.37.0"

// chart is what a chart kind's folder says of its chart.
type chart struct {
	// meta is .Chart: Chart.yaml's fields under Helm's names.
	meta map[string]any
	// values are the chart's values.yaml.
	values map[string]any
	// files are .Files: the chart's other files, by path.
	files map[string][]byte
	// subcharts are the charts under its charts/ (in _charts/<name>/),
	// whose templates are the kind's files named charts--<name>--*.
	subcharts map[string]*chart
	// conditions are the subcharts' conditions: a values path that turns
	// one off when false.
	conditions map[string]string
}

// loadChart reads a chart kind's chart from its folder; nil when the
// folder has no _chart.yaml (not a chart kind).
func loadChart(fsys fs.FS) (*chart, error) {
	raw, err := fs.ReadFile(fsys, chartFile)
	if err != nil {
		if isNotExist(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading %s: %w", chartFile, err)
	}
	var fields map[string]any
	if err := yaml.Unmarshal(raw, &fields); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", chartFile, err)
	}
	if name, _ := fields["name"].(string); name == "" {
		return nil, fmt.Errorf("%s: the chart has no name", chartFile)
	}
	c := &chart{meta: chartMeta(fields), values: map[string]any{}, files: map[string][]byte{}}
	if raw, err = fs.ReadFile(fsys, valuesFile); err != nil && !isNotExist(err) {
		return nil, fmt.Errorf("reading %s: %w", valuesFile, err)
	}
	if err := yaml.Unmarshal(raw, &c.values); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", valuesFile, err)
	}
	if c.values == nil {
		c.values = map[string]any{}
	}
	if c.files, err = readFiles(fsys); err != nil {
		return nil, err
	}
	if err := c.loadSubcharts(fsys, fields); err != nil {
		return nil, err
	}
	return c, nil
}

// subchartsDir holds a chart kind's subcharts, one folder each.
const subchartsDir = "_charts"

func (c *chart) loadSubcharts(fsys fs.FS, fields map[string]any) error {
	c.subcharts, c.conditions = map[string]*chart{}, map[string]string{}
	entries, err := fs.ReadDir(fsys, subchartsDir)
	if err != nil && !isNotExist(err) {
		return fmt.Errorf("reading %s: %w", subchartsDir, err)
	}
	for _, e := range entries {
		sub, err := fs.Sub(fsys, subchartsDir+"/"+e.Name())
		if err != nil {
			return err
		}
		if c.subcharts[e.Name()], err = loadChart(sub); err != nil || c.subcharts[e.Name()] == nil {
			return fmt.Errorf("subchart %s: %w", e.Name(), errors.Join(err, errors.New("no "+chartFile)))
		}
		c.subcharts[e.Name()].meta["Name"] = e.Name() // its alias, as Helm names an aliased subchart
	}
	deps, _ := fields["dependencies"].([]any)
	for _, d := range deps {
		dep, _ := d.(map[string]any)
		name, _ := dep["name"].(string)
		if alias, _ := dep["alias"].(string); alias != "" {
			name = alias
		}
		if cond, _ := dep["condition"].(string); cond != "" {
			c.conditions[name] = cond
		}
	}
	return nil
}

// subchartOf splits a chart kind's file name: charts--<sub>--<rest> is
// the subchart sub's template rest; any other file is the chart's own.
func subchartOf(file string) (sub, rest string) {
	after, ok := strings.CutPrefix(file, "charts--")
	if !ok {
		return "", file
	}
	sub, rest, ok = strings.Cut(after, "--")
	if !ok {
		return "", file
	}
	return sub, rest
}

// chartMeta names Chart.yaml's fields as Helm's .Chart does: name is
// Name, appVersion is AppVersion, apiVersion is APIVersion.
func chartMeta(fields map[string]any) map[string]any {
	meta := map[string]any{}
	for k, v := range fields {
		switch k {
		case "apiVersion":
			meta["APIVersion"] = v
		case "kubeVersion":
			meta["KubeVersion"] = v
		default:
			meta[strings.ToUpper(k[:1])+k[1:]] = v
		}
	}
	for _, k := range []string{"Name", "Version", "AppVersion", "Description", "Type", "Home", "Icon"} {
		if _, ok := meta[k]; !ok {
			meta[k] = ""
		}
	}
	return meta
}

func readFiles(fsys fs.FS) (map[string][]byte, error) {
	files := map[string][]byte{}
	err := fs.WalkDir(fsys, filesDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fsys, p)
		files[strings.TrimPrefix(p, filesDir+"/")] = data
		return err
	})
	if err != nil && !isNotExist(err) {
		return nil, fmt.Errorf("reading %s: %w", filesDir, err)
	}
	return files, nil
}

// helmData is the dot of a chart kind's template file: Helm's objects for
// the custom resource obj whose values are values (see [Values]); nil when
// the file is a subchart's whose condition is false.
func (k *Kind) helmData(obj v1alpha1.Object, values map[string]any, file string) map[string]any {
	c, base := k.chart, k.chart.name()+"/templates"
	if sub, _ := subchartOf(file); sub != "" {
		if c = k.chart.subcharts[sub]; c == nil || !enabled(values, k.chart.conditions[sub]) {
			return nil
		}
		base = k.chart.name() + "/charts/" + sub + "/templates"
		values = subchartValues(values, sub)
	}
	return map[string]any{
		"Values": values,
		"Release": map[string]any{
			"Name": obj.GetName(), "Namespace": obj.GetNamespace(), "Service": k.cluster.releaseService(),
			"IsInstall": true, "IsUpgrade": false, "Revision": 1,
		},
		"Chart":        deepCopyValue(c.meta), // a template may set into it
		"Capabilities": helmCapabilities{APIVersions: helmAPIVersions{k: k}, KubeVersion: k.cluster.kubeVersion(), HelmVersion: helmVersion},
		"Template":     map[string]any{"Name": HelmTemplateName(k.chart.name(), file), "BasePath": base},
		"Files":        Files(maps.Clone(c.files)),
	}
}

// enabled: a subchart's condition, comma-separated values paths, is not
// false: as in Helm, the first path that holds a boolean decides, and
// none turns nothing off.
func enabled(values map[string]any, cond string) bool {
	for path := range strings.SplitSeq(cond, ",") {
		if b, ok := boolAt(values, strings.TrimSpace(path)); ok {
			return b
		}
	}
	return true
}

// boolAt is the boolean at the dotted path of values.
func boolAt(values map[string]any, path string) (value, ok bool) {
	var v any = values
	for key := range strings.SplitSeq(path, ".") {
		m, isMap := v.(map[string]any)
		if !isMap {
			return false, false
		}
		v = m[key]
	}
	value, ok = v.(bool)
	return value, ok
}

// subchartValues are the subchart sub's .Values: the parent's values
// under sub, and the parent's globals.
func subchartValues(values map[string]any, sub string) map[string]any {
	own, _ := values[sub].(map[string]any)
	out := maps.Clone(own)
	if out == nil {
		out = map[string]any{}
	}
	if g, ok := values["global"].(map[string]any); ok {
		subGlobal, _ := out["global"].(map[string]any)
		out["global"] = coalesce(g, subGlobal)
	}
	return out
}

// HelmTemplateName is the name Helm gives a chart's template file: the
// chart's name, "templates", and the file's path there. stencil's folder
// is flat: a file of a subfolder is named with "--" for each "/", and a
// subchart's file charts--<sub>--<file>.
func HelmTemplateName(chartName, file string) string {
	if sub, rest := subchartOf(file); sub != "" {
		return chartName + "/charts/" + sub + "/templates/" + strings.ReplaceAll(rest, "--", "/")
	}
	return chartName + "/templates/" + strings.ReplaceAll(file, "--", "/")
}

// Values is .Values of a chart kind's resource obj: its spec over the
// chart's values, merged as Helm merges a release's values into the
// chart's: maps merge key by key, any other value replaces the chart's,
// and a null removes the chart's value. Numbers are float64, as Helm reads
// values files.
func Values(obj v1alpha1.Object, chartValues map[string]any) (map[string]any, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("reading the spec as values: %w", err)
	}
	var whole struct {
		Spec map[string]any `json:"spec"`
	}
	if err := json.Unmarshal(raw, &whole); err != nil {
		return nil, fmt.Errorf("reading the spec as values: %w", err)
	}
	return coalesce(whole.Spec, chartValues), nil
}

// valuesOf is .Values of obj, with each subchart's values (under its
// name) merged over the subchart's own, as Helm merges them.
func (c *chart) valuesOf(obj v1alpha1.Object) (map[string]any, error) {
	values, err := Values(obj, c.values)
	if err != nil {
		return nil, err
	}
	for name, sub := range c.subcharts {
		own, _ := values[name].(map[string]any)
		values[name] = coalesce(own, sub.values)
	}
	return values, nil
}

// coalesce merges user values over defaults into a new map, as Helm
// v4.3.0 does: a null in defaults is no key, a null in user removes the
// default, and is kept where defaults have no such key.
func coalesce(user, defaults map[string]any) map[string]any {
	out := make(map[string]any, len(defaults)+len(user))
	for k, d := range defaults {
		u, set := user[k]
		switch {
		case !set && d == nil:
			// A null of the chart's is no key, as in Helm.
		case !set:
			if dm, ok := d.(map[string]any); ok {
				out[k] = coalesce(nil, dm) // a copy without its nulls
			} else {
				out[k] = deepCopyValue(d)
			}
		case u == nil:
			// A null removes the chart's value.
		default:
			um, uIsMap := u.(map[string]any)
			dm, dIsMap := d.(map[string]any)
			if uIsMap && dIsMap {
				out[k] = coalesce(um, dm)
			} else {
				out[k] = u
			}
		}
	}
	for k, u := range user {
		if _, done := defaults[k]; !done {
			out[k] = u // a null too, as Helm keeps it
		}
	}
	return out
}

func deepCopyValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = deepCopyValue(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = deepCopyValue(e)
		}
		return out
	}
	return v
}

// helmCapabilities is .Capabilities.
type helmCapabilities struct {
	APIVersions helmAPIVersions
	KubeVersion KubeVersion
	HelmVersion HelmVersion
}

// HelmVersion is .Capabilities.HelmVersion: the Helm release whose
// template semantics stencil follows (and whose helm template the import
// is checked against).
type HelmVersion struct {
	Version, GitCommit, GitTreeState, GoVersion string
}

// helmVersion is the Helm release stencil's chart kinds follow.
var helmVersion = HelmVersion{Version: "v4.3.0"}

// chartFuncs are a chart kind's functions besides the library's, at parse
// time. The impure functions are defined, so that a chart whose helpers
// name them loads: the generating ones become kept values (addSites), the
// time functions pure ones (timeFuncs), and the rest fail when a render
// calls one. lookup is the execution's (see [lookups]).
func chartFuncs() template.FuncMap {
	fm := template.FuncMap{}
	for _, name := range impure {
		fm[name] = func(...any) (any, error) {
			if isGenerator(name) {
				// Only a call addSites saw is kept: not one of tpl's.
				return nil, fmt.Errorf("%s: a template made of values (tpl) may not generate a value; call it in the chart's templates (docs/from-helm.md)", name)
			}
			return nil, fmt.Errorf("%s: a render is a pure function of the resource; make the value a field of the spec (docs/from-helm.md)", name)
		}
	}
	fm["lookup"] = func(string, string, string, string) (map[string]any, error) { return map[string]any{}, nil }
	return fm
}

// helmAPIVersions is .Capabilities.APIVersions: a chart asks it about
// types it does not own (policy/v1, for the version of a
// PodDisruptionBudget), so it answers for Kubernetes' own types too, as
// `helm template` does, besides those the kind declares.
type helmAPIVersions struct{ k *Kind }

// Has reports whether the cluster serves v: "group/version/Kind" or
// "group/version".
func (v helmAPIVersions) Has(s string) (bool, error) {
	gvk, isKind := parseAPIVersion(s)
	if slices.ContainsFunc(v.k.declaredTypes(), func(t schema.GroupVersionKind) bool {
		return t == gvk || !isKind && t.GroupVersion() == gvk.GroupVersion()
	}) {
		return APIVersions(v).Has(s)
	}
	builtIn := builtInVersions()
	if isKind {
		return builtIn.kinds[gvk], nil
	}
	return builtIn.groupVersions[gvk.GroupVersion()], nil
}

// builtIns are the API versions and types of Kubernetes' own API, as
// client-go knows them.
type builtIns struct {
	kinds         map[schema.GroupVersionKind]bool
	groupVersions map[schema.GroupVersion]bool
}

var builtInVersions = sync.OnceValue(func() builtIns {
	b := builtIns{kinds: map[schema.GroupVersionKind]bool{}, groupVersions: map[schema.GroupVersion]bool{}}
	for gvk := range scheme.Scheme.AllKnownTypes() {
		if gvk.Version == "__internal" || strings.HasSuffix(gvk.Kind, "List") || strings.HasSuffix(gvk.Kind, "Options") {
			continue
		}
		b.kinds[gvk] = true
		b.groupVersions[gvk.GroupVersion()] = true
	}
	return b
})

// KubeVersion is .Capabilities.KubeVersion.
type KubeVersion struct {
	Version    string // v1.37.0
	Major      string // 1
	Minor      string // 37
	GitVersion string // v1.37.0
}

func (v KubeVersion) String() string { return v.Version }

// ParseKubeVersion reads a Kubernetes version such as "v1.37.0" or
// "1.37".
func ParseKubeVersion(s string) (KubeVersion, error) {
	sv, err := semver.NewVersion(s)
	if err != nil {
		return KubeVersion{}, fmt.Errorf("kube version %q: %w", s, err)
	}
	full := "v" + sv.String()
	return KubeVersion{Version: full, Major: fmt.Sprint(sv.Major()), Minor: fmt.Sprint(sv.Minor()), GitVersion: full}, nil
}

// WithKubeVersion returns a copy of k whose charts see the Kubernetes
// version v: the cluster's, live; --kube-version's, offline. Without it,
// [DefaultKubeVersion].
func (k *Kind) WithKubeVersion(v KubeVersion) *Kind {
	c := *k
	c.cluster.kube = &v
	return &c
}

// KubeVersion is .Capabilities.KubeVersion of the chart.
func (g *Chart) KubeVersion() KubeVersion {
	if g == nil {
		return KubeVersion{}
	}
	k := g.k
	return k.cluster.kubeVersion()
}

// WithReleaseService returns a copy of k whose charts read .Release.Service
// as s rather than [ReleaseService]: "Helm", to compare a render with
// `helm template`'s.
func (k *Kind) WithReleaseService(s string) *Kind {
	c := *k
	c.cluster.service = s
	return &c
}

// Values are the chart's values.
func (g *Chart) Values() map[string]any {
	if g == nil {
		return nil
	}
	k := g.k
	if k.chart == nil {
		return nil
	}
	return maps.Clone(k.chart.values)
}

// Files is .Files: the chart's files outside templates/.
type Files map[string][]byte

// Get returns a file's content ("" when there is none).
func (f Files) Get(name string) string { return string(f[name]) }

// GetBytes returns a file's content.
func (f Files) GetBytes(name string) []byte { return f[name] }

// Glob returns the files whose path matches pattern (path.Match).
func (f Files) Glob(pattern string) Files {
	out := Files{}
	for name, data := range f {
		if ok, _ := path.Match(pattern, name); ok {
			out[name] = data
		}
	}
	return out
}

// Lines returns a file's lines.
func (f Files) Lines(name string) []string {
	s := strings.TrimSuffix(string(f[name]), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// AsConfig is the files as a ConfigMap's data, by base name, in YAML.
func (f Files) AsConfig() string { return f.asData(func(b []byte) string { return string(b) }) }

// AsSecrets is the files as a Secret's data, by base name, base64-encoded,
// in YAML.
func (f Files) AsSecrets() string {
	return f.asData(encodeBase64)
}

func (f Files) asData(encode func([]byte) string) string {
	if len(f) == 0 {
		return ""
	}
	data := map[string]string{}
	for name, b := range f {
		data[path.Base(name)] = encode(b)
	}
	out, _ := yaml.Marshal(data)
	return strings.TrimSuffix(string(out), "\n")
}

// name is the chart's name; "" for no chart (a kind that is not a chart
// kind's).
func (c *chart) name() string {
	if c == nil {
		return ""
	}
	name, _ := c.meta["Name"].(string)
	return name
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

func encodeBase64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// chartFolders are the files of a chart kind's subfolders (its files and
// its subcharts), by path, which digestFolder does not read.
func chartFolders(fsys fs.FS) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, dir := range []string{filesDir, subchartsDir} {
		err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			out[p], err = fs.ReadFile(fsys, p)
			return err
		})
		if err != nil && !isNotExist(err) {
			return nil, fmt.Errorf("reading %s: %w", dir, err)
		}
	}
	return out, nil
}

// digestFiles adds a chart's files, which are in a subfolder, to a kind's
// digest of its folder's files (see digestFolder).
func digestFiles(digest string, files map[string][]byte) string {
	if len(files) == 0 {
		return digest
	}
	h := sha256.New()
	h.Write([]byte(digest))
	for _, name := range slices.Sorted(maps.Keys(files)) {
		_, _ = fmt.Fprintf(h, "%s\x00%d\x00", name, len(files[name]))
		h.Write(files[name])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))[:12]
}

// withoutTests drops the chart's helm test objects (helm.sh/hook test,
// test-success or test-failure), as helm template --skip-tests does:
// stencil has no helm test.
func (c *chart) withoutTests(docs []*unstructured.Unstructured) []*unstructured.Unstructured {
	if c == nil {
		return docs
	}
	return slices.DeleteFunc(docs, func(o *unstructured.Unstructured) bool {
		for h := range strings.SplitSeq(o.GetAnnotations()["helm.sh/hook"], ",") {
			if strings.HasPrefix(strings.TrimSpace(h), "test") {
				return true
			}
		}
		return false
	})
}
