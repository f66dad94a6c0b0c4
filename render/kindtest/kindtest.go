// Package kindtest runs the template tests a kind's folder carries, in
// templates/<kind>/tests/<case>/:
//
//   - input.yaml: the custom resource, defaulted by its
//     CustomResourceDefinition's schema as the API server would store it
//     (see [RunKind]); for a decorator, its parent as the cluster holds it;
//   - observed.yaml (optional): for a decorator, the observed objects, by
//     the name the templates read them as; for a graph kind, the live
//     objects its render reads (its own earlier objects and its inputs),
//     as a YAML stream;
//   - expected.yaml (optional): every object the render must produce, in
//     full, as `stencil test -update` writes it (for a graph kind, after a
//     comment line per node that waits);
//   - fragments.yaml (optional): objects the render must produce, each given
//     by apiVersion, kind and name and only the fields that matter;
//   - error.txt (optional): the render must fail with this message;
//   - api-versions.txt (optional): the optional owned types the cluster
//     serves in this case, one "group/version/Kind" or "group/version" a
//     line (# starts a comment), as stencil render --api-versions takes
//     them; without it the case renders with none served (or with
//     --api-versions, under stencil test);
//   - converted.yaml (optional, for a kind with several versions): the
//     input converted to each of the kind's other versions, a YAML stream
//     in the order of [render.Conversion.Versions].
//
// An input may be written at any of the kind's versions: it is converted
// to the hub, which the templates read, as the API server would.
//
// A case with none of the last three passes when the render succeeds and
// every object is valid. It is pure: cases are read from an fs.FS, and the
// outcome carries the output for the caller to write back with -update.
//
// It is not public API: it may change in any release. Depend on pkg/stencil
// and pkg/stenciltest (docs/stability.md).
package kindtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/render"
)

// Folder is where a kind's folder keeps its cases.
const Folder = "tests"

// Files of a case.
const (
	InputFile     = "input.yaml"
	ObservedFile  = "observed.yaml"
	ExpectedFile  = "expected.yaml"
	FragmentsFile = "fragments.yaml"
	ErrorFile     = "error.txt"
	// APIVersionsFile lists the optional owned types the cluster serves
	// in the case.
	APIVersionsFile = "api-versions.txt"
	// ConvertedFile holds the input at the kind's other versions.
	ConvertedFile = "converted.yaml"
)

// Case is one test case of a kind.
type Case struct {
	// Name is the case's folder name.
	Name string
	// Files are the case's files by name (only those present).
	Files map[string][]byte
}

// Cases reads every case under tests/ of a kind's folder, in name order; a
// folder without tests/ has none.
func Cases(kindFolder fs.FS) ([]Case, error) {
	entries, err := fs.ReadDir(kindFolder, Folder)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", Folder, err)
	}
	var cases []Case
	for _, e := range entries {
		if !e.IsDir() {
			return nil, fmt.Errorf("%s/%s: a case is a folder", Folder, e.Name())
		}
		c := Case{Name: e.Name(), Files: map[string][]byte{}}
		for _, f := range []string{InputFile, ObservedFile, ExpectedFile, FragmentsFile, ErrorFile, APIVersionsFile, ConvertedFile} {
			data, err := fs.ReadFile(kindFolder, path.Join(Folder, e.Name(), f))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", path.Join(Folder, e.Name(), f), err)
			}
			c.Files[f] = data
		}
		if c.Files[InputFile] == nil {
			return nil, fmt.Errorf("%s/%s: no %s", Folder, e.Name(), InputFile)
		}
		if c.Files[ErrorFile] != nil && (c.Files[ExpectedFile] != nil || c.Files[FragmentsFile] != nil) {
			return nil, fmt.Errorf("%s/%s: %s with %s or %s: a case expects a failure or objects, not both", Folder, e.Name(), ErrorFile, ExpectedFile, FragmentsFile)
		}
		cases = append(cases, c)
	}
	return cases, nil
}

// Outcome is the result of one case.
type Outcome struct {
	Case string
	// Err is why the case failed, nil when it passed.
	Err error
	// Golden is the file -update may rewrite, and Got its new content;
	// empty when there is none to rewrite (see [Outcome.Updatable]).
	Golden string
	Got    []byte
}

// Updatable reports whether -update may write o's golden file for c: a
// golden file the case has (expected.yaml or error.txt, the render failing
// or not as before), or expected.yaml for a case that states no
// expectation yet and renders. A render that newly fails, or that newly
// succeeds, is never recorded as expected: it stays a failure to look at.
func (o Outcome) Updatable(c Case) bool {
	switch o.Golden {
	case ErrorFile:
		return c.Files[ErrorFile] != nil
	case ExpectedFile:
		if c.Files[ErrorFile] != nil || c.Files[FragmentsFile] != nil && c.Files[ExpectedFile] == nil {
			return false
		}
		return true
	}
	return false
}

// Defaulter sets the defaults a custom resource type's schema declares, as
// the API server does before it stores a resource (a *schema.Validator is
// one).
type Defaulter interface {
	Default(*unstructured.Unstructured) error
}

// RunKind runs c against k, checking every object with v (when not nil).
// When v is a [Defaulter] too, the input is defaulted first, as the API
// server stores it: the render is the operator's.
func RunKind(k *render.Kind, c Case, v render.Validator) Outcome {
	if data, ok := c.Files[APIVersionsFile]; ok {
		versions, err := APIVersions(k, data)
		if err != nil {
			return Outcome{Case: c.Name, Err: fmt.Errorf("%s: %w", APIVersionsFile, err)}
		}
		k = k.WithAPIVersions(versions)
	}
	d, _ := v.(Defaulter)
	if want, ok := c.Files[ConvertedFile]; ok {
		if err := checkConverted(k, c.Files[InputFile], want); err != nil {
			return Outcome{Case: c.Name, Err: err}
		}
	}
	cr, err := Decode(k, c.Files[InputFile], d)
	if err != nil {
		return Outcome{Case: c.Name, Err: fmt.Errorf("%s: %w", InputFile, err)}
	}
	if k.Graph() == nil {
		objs, err := k.RenderValidated(cr, v)
		return judge(c, objs, err)
	}
	live, err := render.DecodeObjects(c.Files[ObservedFile])
	if err != nil {
		return Outcome{Case: c.Name, Err: fmt.Errorf("%s: %w", ObservedFile, err)}
	}
	plan, err := k.RenderGraphValidated(cr, render.GraphInput{Live: live, Random: render.FixedRandom()}, v)
	if err != nil {
		return judge(c, nil, err)
	}
	out := judgeWith(c, plan.Objects, nil, waitingComments(plan))
	return out
}

// Decode reads one custom resource of k's kind from a YAML document,
// refusing fields its type lacks, and sets its schema's defaults with d
// (when not nil) on the document as written, as the API server does: a
// field absent from the document is defaulted even where the Go type
// would decode it as a zero value.
func Decode(k *render.Kind, doc []byte, d Defaulter) (v1alpha1.Object, error) {
	if k.Conversion().Converts() {
		var err error
		if doc, err = toHub(k, doc, d); err != nil {
			return nil, err
		}
	}
	cr := k.New()
	if err := yaml.UnmarshalStrict(doc, cr); err != nil {
		return nil, err
	}
	if d == nil {
		return cr, nil
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(doc, &u.Object); err != nil {
		return nil, err
	}
	if err := d.Default(u); err != nil {
		return nil, fmt.Errorf("defaulting: %w", err)
	}
	defaulted := k.New()
	data, err := json.Marshal(u.Object)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, defaulted); err != nil {
		return nil, fmt.Errorf("defaulted: %w", err)
	}
	return defaulted, nil
}

// toHub converts a resource written at another of k's versions to the hub,
// defaulted by its own version's schema first, as the API server stores
// it; a resource at the hub is returned as it is.
func toHub(k *render.Kind, doc []byte, d Defaulter) ([]byte, error) {
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(doc, &u.Object); err != nil {
		return nil, err
	}
	if u.GroupVersionKind().Version == k.Conversion().Hub() {
		return doc, nil
	}
	if d != nil {
		if err := d.Default(u); err != nil {
			return nil, fmt.Errorf("defaulting: %w", err)
		}
	}
	hub, err := k.Conversion().Convert(u.Object, k.Conversion().Hub())
	if err != nil {
		return nil, err
	}
	return yaml.Marshal(hub)
}

// checkConverted compares the input, converted to each of the kind's other
// versions, with converted.yaml.
func checkConverted(k *render.Kind, input, want []byte) error {
	in := map[string]any{}
	if err := yaml.Unmarshal(input, &in); err != nil {
		return fmt.Errorf("%s: %w", InputFile, err)
	}
	from := (&unstructured.Unstructured{Object: in}).GroupVersionKind().Version
	var got []*unstructured.Unstructured
	for _, v := range k.Conversion().Versions() {
		if v == from {
			continue
		}
		out, err := k.Conversion().Convert(in, v)
		if err != nil {
			return err
		}
		got = append(got, &unstructured.Unstructured{Object: out})
	}
	stream, err := Stream(got)
	if err != nil {
		return err
	}
	if !bytes.Equal(stream, want) {
		return fmt.Errorf("%s differs:\n--- got\n%s--- want\n%s", ConvertedFile, stream, want)
	}
	return nil
}

// waitingComments are the comment lines that head a graph kind's expected
// output: one per node that waits.
func waitingComments(plan *render.Plan) []byte {
	var b bytes.Buffer
	for _, w := range plan.Waiting {
		fmt.Fprintf(&b, "# not rendered: %s\n", strings.ReplaceAll(w.String(), "\n", " "))
	}
	return b.Bytes()
}

// RunDecorator runs c against d: the parent's patch, then its children,
// each child checked with v (when not nil).
func RunDecorator(d *render.Decorator, c Case, v render.Validator) Outcome {
	parent := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(c.Files[InputFile], &parent.Object); err != nil {
		return Outcome{Case: c.Name, Err: fmt.Errorf("%s: %w", InputFile, err)}
	}
	observed := map[string][]*unstructured.Unstructured{}
	if data := c.Files[ObservedFile]; data != nil {
		var lists map[string][]map[string]any
		if err := yaml.Unmarshal(data, &lists); err != nil {
			return Outcome{Case: c.Name, Err: fmt.Errorf("%s: %w", ObservedFile, err)}
		}
		for as, list := range lists {
			for _, o := range list {
				observed[as] = append(observed[as], &unstructured.Unstructured{Object: o})
			}
		}
	}
	patch, children, err := d.Render(parent, observed)
	if err == nil && v != nil {
		for _, child := range children {
			if err = v.Validate(child); err != nil {
				break
			}
		}
	}
	if patch != nil {
		children = append([]*unstructured.Unstructured{patch}, children...)
	}
	return judge(c, children, err)
}

// judge compares a render's result with what the case expects.
func judge(c Case, objs []*unstructured.Unstructured, renderErr error) Outcome {
	return judgeWith(c, objs, renderErr, nil)
}

// judgeWith is judge, with head written before the objects in the output
// that expected.yaml holds.
func judgeWith(c Case, objs []*unstructured.Unstructured, renderErr error, head []byte) Outcome {
	if renderErr != nil {
		got := []byte(renderErr.Error() + "\n")
		out := Outcome{Case: c.Name, Golden: ErrorFile, Got: got}
		switch want, ok := c.Files[ErrorFile]; {
		case !ok:
			out.Err = fmt.Errorf("render failed: %w", renderErr)
		case !bytes.Equal(got, want):
			out.Err = fmt.Errorf("render failed otherwise than %s says:\n--- got\n%s--- want\n%s", ErrorFile, got, want)
		}
		return out
	}
	got, err := Stream(objs)
	got = append(head, got...)
	out := Outcome{Case: c.Name, Golden: ExpectedFile, Got: got, Err: err}
	if err != nil {
		return out
	}
	if want, ok := c.Files[ErrorFile]; ok {
		out.Err = fmt.Errorf("render succeeded; %s wants it to fail with %s", ErrorFile, strings.TrimSpace(string(want)))
		return out
	}
	if want, ok := c.Files[ExpectedFile]; ok && !bytes.Equal(got, want) {
		out.Err = fmt.Errorf("%s differs (run with -update and review the diff):\n--- got\n%s--- want\n%s", ExpectedFile, got, want)
		return out
	}
	if data, ok := c.Files[FragmentsFile]; ok {
		out.Err = matchFragments(data, objs)
	}
	return out
}

// Stream writes objects as a YAML stream, the format of expected.yaml.
func Stream(objs []*unstructured.Unstructured) ([]byte, error) {
	var buf bytes.Buffer
	for i, o := range objs {
		if i > 0 {
			buf.WriteString("---\n")
		}
		out, err := yaml.Marshal(o.Object)
		if err != nil {
			return nil, fmt.Errorf("writing %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		buf.Write(out)
	}
	return buf.Bytes(), nil
}

// matchFragments checks that every fragment is contained in the rendered
// object of the same apiVersion, kind and name.
func matchFragments(data []byte, objs []*unstructured.Unstructured) error {
	var errs []error
	for i, doc := range bytes.Split(data, []byte("\n---\n")) {
		fragment := map[string]any{}
		if err := yaml.Unmarshal(doc, &fragment); err != nil {
			return fmt.Errorf("%s document %d: %w", FragmentsFile, i+1, err)
		}
		if len(fragment) == 0 {
			continue
		}
		f := &unstructured.Unstructured{Object: fragment}
		idx := slices.IndexFunc(objs, func(o *unstructured.Unstructured) bool {
			return o.GetAPIVersion() == f.GetAPIVersion() && o.GetKind() == f.GetKind() && o.GetName() == f.GetName()
		})
		if idx < 0 {
			errs = append(errs, fmt.Errorf("%s: %s %s (%s) is not rendered", FragmentsFile, f.GetKind(), f.GetName(), f.GetAPIVersion()))
			continue
		}
		if path, ok := contains(objs[idx].Object, fragment, ""); !ok {
			errs = append(errs, fmt.Errorf("%s: %s %s: %s differs from the fragment", FragmentsFile, f.GetKind(), f.GetName(), path))
		}
	}
	return errors.Join(errs...)
}

// contains reports whether want is a part of got: maps by key, lists item by
// item and of the same length, values equal. path names the first place it
// is not.
func contains(got, want any, path string) (string, bool) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return path, false
		}
		for _, k := range slices.Sorted(maps.Keys(w)) {
			if p, ok := contains(g[k], w[k], path+"."+k); !ok {
				return p, false
			}
		}
		return "", true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return path, false
		}
		for i := range w {
			if p, ok := contains(g[i], w[i], fmt.Sprintf("%s[%d]", path, i)); !ok {
				return p, false
			}
		}
		return "", true
	}
	return path, reflect.DeepEqual(normalise(got), normalise(want))
}

// normalise makes numbers comparable: JSON decoding gives int64 and float64
// where YAML gives int.
func normalise(v any) any {
	switch n := v.(type) {
	case int:
		return float64(n)
	case int64:
		return float64(n)
	case float64:
		return n
	}
	return v
}

// APIVersions reads an api-versions.txt: one "group/version/Kind" or
// "group/version" a line, blank lines and # comments skipped. Each must
// name an optional owned type of k (or its group/version): a line that
// names none is an error, not a case that silently tests nothing.
func APIVersions(k *render.Kind, data []byte) ([]string, error) {
	var out []string
	for i, line := range strings.Split(string(data), "\n") {
		line, _, _ = strings.Cut(line, "#")
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if !namesOptional(k, line) {
			return nil, fmt.Errorf("line %d: %q names no optional owned type of %s (optional: true under owns in _kind.yaml)", i+1, line, k.GroupVersionKind().Kind)
		}
		out = append(out, line)
	}
	return out, nil
}

// namesOptional reports whether s ("group/version/Kind" or
// "group/version") names one of k's optional owned types.
func namesOptional(k *render.Kind, s string) bool {
	for _, gvk := range k.OptionalTypes() {
		if s == gvk.GroupVersion().String()+"/"+gvk.Kind || s == gvk.GroupVersion().String() {
			return true
		}
	}
	return false
}

// Healthy gives o the status of a ready object of its type, as kstatus
// reads it: a live object for a graph node that waits for it (the cases
// of a graph kind, and the import of a chart whose hooks make one). Every
// built-in type kstatus has a rule for is covered (TestHealthyIsCurrent);
// kstatus calls any other type without a status current.
func Healthy(o *unstructured.Unstructured) *unstructured.Unstructured {
	o.SetGeneration(1)
	replicas, found, _ := unstructured.NestedInt64(o.Object, "spec", "replicas")
	if !found {
		replicas = 1
	}
	ready := func(conditions ...string) []any {
		var out []any
		for _, c := range conditions {
			out = append(out, map[string]any{"type": c, "status": "True"})
		}
		return out
	}
	status := map[string]any{"observedGeneration": int64(1)}
	switch o.GroupVersionKind().GroupKind() {
	default:
		return o
	case schema.GroupKind{Group: "apps", Kind: "Deployment"}:
		maps.Copy(status, map[string]any{"replicas": replicas, "readyReplicas": replicas,
			"updatedReplicas": replicas, "availableReplicas": replicas, "conditions": ready("Available")})
	case schema.GroupKind{Group: "apps", Kind: "StatefulSet"}:
		maps.Copy(status, map[string]any{"replicas": replicas, "readyReplicas": replicas,
			"currentReplicas": replicas, "updatedReplicas": replicas, "availableReplicas": replicas,
			"currentRevision": "r1", "updateRevision": "r1"})
	case schema.GroupKind{Group: "apps", Kind: "ReplicaSet"}:
		maps.Copy(status, map[string]any{"replicas": replicas, "readyReplicas": replicas,
			"availableReplicas": replicas, "fullyLabeledReplicas": replicas})
	case schema.GroupKind{Group: "apps", Kind: "DaemonSet"}:
		// One node: the DaemonSet's pod on it is ready.
		maps.Copy(status, map[string]any{"desiredNumberScheduled": int64(1), "currentNumberScheduled": int64(1),
			"updatedNumberScheduled": int64(1), "numberAvailable": int64(1), "numberReady": int64(1)})
	case schema.GroupKind{Group: "batch", Kind: "Job"}:
		status = map[string]any{"succeeded": int64(1), "conditions": ready("Complete")}
	case schema.GroupKind{Kind: "Pod"}:
		status = map[string]any{"phase": "Running", "conditions": ready("Ready")}
	case schema.GroupKind{Kind: "PersistentVolumeClaim"}:
		status = map[string]any{"phase": "Bound"}
	case schema.GroupKind{Kind: "Service"}:
		healthyService(o)
		return o
	case schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:
		status = map[string]any{"conditions": ready("NamesAccepted", "Established")}
	}
	o.Object["status"] = status
	return o
}

// healthyService gives a Service what the API server and a load balancer
// give it: a cluster IP (but to a headless or ExternalName one) and, for a
// LoadBalancer, an ingress address.
func healthyService(o *unstructured.Unstructured) {
	typ, _, _ := unstructured.NestedString(o.Object, "spec", "type")
	if ip, _, _ := unstructured.NestedString(o.Object, "spec", "clusterIP"); ip == "" && typ != "ExternalName" {
		_ = unstructured.SetNestedField(o.Object, "10.96.0.10", "spec", "clusterIP")
	}
	if typ == "LoadBalancer" {
		o.Object["status"] = map[string]any{"loadBalancer": map[string]any{"ingress": []any{map[string]any{"ip": "192.0.2.10"}}}}
	}
}
