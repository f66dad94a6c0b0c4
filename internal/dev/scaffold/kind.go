package scaffold

import (
	"bytes"
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
		filepath.Join("api", k.Package, k.Version, "doc.go"):                 docGo,
		filepath.Join("api", k.Package, k.Version, k.Lower+"_types.go"):      typesGo,
		filepath.Join("templates", k.Lower, "_kind.yaml"):                    kindYAML,
		filepath.Join("templates", k.Lower, "configmap.yaml"):                configMapYAML,
		filepath.Join("config", "samples", k.Lower+".yaml"):                  sampleYAML,
		filepath.Join("config", "samples", "full", k.Lower+".yaml"):          fullSampleYAML,
		filepath.Join("templates", k.Lower, "tests", "sample", "input.yaml"): goldenInputYAML,
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
		filepath.Join("api", k.Package, k.Version, "doc.go"):            docGo,
		filepath.Join("api", k.Package, k.Version, k.Lower+"_types.go"): chartTypesGo,
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

// scaffoldFiles writes files (templates of kind k) and raw (as they are)
// under root and edits the registrations.
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

func write(root, path string, k kind, text string) error {
	var b bytes.Buffer
	if err := template.Must(template.New(path).Delims("[[", "]]").Parse(text)).Execute(&b, k); err != nil {
		return err
	}
	data := b.Bytes()
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
	imports := "\t" + k.Alias + " \"" + k.Module + "/api/" + k.Package + "/" + k.Version + "\"\n"
	if !strings.Contains(text, `"github.com/stencil-operator/stencil/api/v1alpha1"`) {
		imports += "\t\"github.com/stencil-operator/stencil/api/v1alpha1\"\n"
	}
	steps := []struct{ marker, insert string }{
		{importsMarker, imports},
		{kindsMarker, "\t{GroupVersionKind: " + k.Alias + ".GroupVersion.WithKind(\"" + k.Kind + "\"), New: func() v1alpha1.Object { return &" + k.Alias + "." + k.Kind + "{} }, AddToScheme: " + k.Alias + ".AddToScheme, Templates: Kind(\"" + k.Lower + "\")},\n"},
	}
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

const docGo = `// Package [[.Version]] is the [[.Group]]/[[.Version]] API: the [[.Kind]] kind.
//
// +kubebuilder:object:generate=true
// +groupName=[[.Group]]
package [[.Version]]

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the API's group and version.
	GroupVersion  = schema.GroupVersion{Group: "[[.Group]]", Version: "[[.Version]]"}
	schemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &[[.Kind]]{}, &[[.Kind]]List{})
		metav1.AddToGroupVersion(s, GroupVersion)
		return nil
	})
	// AddToScheme adds the API's types to a scheme.
	AddToScheme = schemeBuilder.AddToScheme
)
`

const typesGo = `package [[.Version]]

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// [[.Kind]]Spec is the desired state of a [[.Kind]]. Add your fields, with
// validation markers; templates/[[.Lower]]/ reads them as .Spec.<Field>.
type [[.Kind]]Spec struct {
	// Message is put in the [[.Kind]]'s ConfigMap (an example field).
	// +kubebuilder:validation:MinLength=1
	Message string ` + "`json:\"message\"`" + `
	// DriftPolicy says what stencil does when another manager changes a
	// field that the templates set: Correct (default) or Report.
	// +optional
	DriftPolicy v1alpha1.DriftPolicy ` + "`json:\"driftPolicy,omitempty\"`" + `
}

// [[.Kind]]Status is the observed state of a [[.Kind]]: stencil's shared
// status, and any fields a status template (templates/[[.Lower]]/_status.yaml)
// fills in.
type [[.Kind]]Status struct {
	v1alpha1.Status ` + "`json:\",inline\"`" + `
}

// [[.Kind]] is a stencil kind; its resources are rendered from templates/[[.Lower]].
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=[[.Plural]],categories={stencil}
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=` + "`" + `.status.conditions[?(@.type=="Ready")].status` + "`" + `
// +kubebuilder:printcolumn:name="Drifted",type=string,JSONPath=` + "`" + `.status.conditions[?(@.type=="Drifted")].status` + "`" + `
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=` + "`" + `.metadata.creationTimestamp` + "`" + `
// +kubebuilder:printcolumn:name="Shard",type=string,priority=1,JSONPath=` + "`" + `.metadata.labels.stencil\.dev/claimed-by` + "`" + `,description="The shard that reconciles it (stencil --shard), when sharded"
type [[.Kind]] struct {
	metav1.TypeMeta   ` + "`json:\",inline\"`" + `
	metav1.ObjectMeta ` + "`json:\"metadata,omitempty\"`" + `

	Spec   [[.Kind]]Spec   ` + "`json:\"spec\"`" + `
	Status [[.Kind]]Status ` + "`json:\"status,omitempty\"`" + `
}

// [[.Kind]]List is a list of [[.Kind]] resources.
// +kubebuilder:object:root=true
type [[.Kind]]List struct {
	metav1.TypeMeta ` + "`json:\",inline\"`" + `
	metav1.ListMeta ` + "`json:\"metadata,omitempty\"`" + `
	Items           [][[.Kind]] ` + "`json:\"items\"`" + `
}

// StencilStatus implements [v1alpha1.Object].
func (o *[[.Kind]]) StencilStatus() *v1alpha1.Status { return &o.Status.Status }

// StencilDriftPolicy implements [v1alpha1.Object].
func (o *[[.Kind]]) StencilDriftPolicy() v1alpha1.DriftPolicy { return o.Spec.DriftPolicy.OrDefault() }
`

const kindYAML = `# Types the [[.Kind]] templates may emit (and stencil may prune, and needs
# RBAC for: make manifests).
owns:
- {apiVersion: v1, kind: ConfigMap}
`

const configMapYAML = `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Name | quote }}
data:
  message: {{ .Spec.Message | quote }}
`

const sampleYAML = `apiVersion: [[.Group]]/[[.Version]]
kind: [[.Kind]]
metadata:
  name: example-[[.Lower]]
spec:
  message: Hello from a [[.Kind]]
`

const fullSampleYAML = `# Every field of [[.Kind]].
apiVersion: [[.Group]]/[[.Version]]
kind: [[.Kind]]
metadata:
  name: [[.Lower]]-full
spec:
  message: Hello from a [[.Kind]]  # put in the ConfigMap
  driftPolicy: Report  # Correct (default) reverts changes by others; Report only shows them
`

const goldenInputYAML = `apiVersion: [[.Group]]/[[.Version]]
kind: [[.Kind]]
metadata:
  uid: 5f0c2a8e-0000-4000-8000-0000000000ff
  namespace: default
  name: example-[[.Lower]]
spec:
  message: Hello from a [[.Kind]]
`

const chartTypesGo = `package [[.Version]]

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// [[.Kind]]Status is the observed state of a [[.Kind]]: stencil's shared
// status.
type [[.Kind]]Status struct {
	v1alpha1.Status ` + "`json:\",inline\"`" + `
}

// [[.Kind]] is a kind made from a Helm chart (stencil import chart): its
// spec is the chart's values, which templates/[[.Lower]]/ reads as .Values.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=[[.Plural]],categories={stencil}
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=` + "`" + `.status.conditions[?(@.type=="Ready")].status` + "`" + `
// +kubebuilder:printcolumn:name="Drifted",type=string,JSONPath=` + "`" + `.status.conditions[?(@.type=="Drifted")].status` + "`" + `
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=` + "`" + `.metadata.creationTimestamp` + "`" + `
type [[.Kind]] struct {
	metav1.TypeMeta   ` + "`json:\",inline\"`" + `
	metav1.ObjectMeta ` + "`json:\"metadata,omitempty\"`" + `

	// Spec is the chart's values; ` + "`stencil manifests`" + ` writes their schema
	// and defaults into the CRD.
	Spec   v1alpha1.Values ` + "`json:\"spec,omitempty\"`" + `
	Status [[.Kind]]Status ` + "`json:\"status,omitempty\"`" + `
}

// [[.Kind]]List is a list of [[.Kind]] resources.
// +kubebuilder:object:root=true
type [[.Kind]]List struct {
	metav1.TypeMeta ` + "`json:\",inline\"`" + `
	metav1.ListMeta ` + "`json:\"metadata,omitempty\"`" + `
	Items           [][[.Kind]] ` + "`json:\"items\"`" + `
}

// StencilStatus implements [v1alpha1.Object].
func (o *[[.Kind]]) StencilStatus() *v1alpha1.Status { return &o.Status.Status }

// StencilDriftPolicy implements [v1alpha1.Object].
func (o *[[.Kind]]) StencilDriftPolicy() v1alpha1.DriftPolicy { return o.Spec.DriftPolicy() }
`
