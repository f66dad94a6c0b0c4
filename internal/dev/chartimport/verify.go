package chartimport

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	yamlv2 "go.yaml.in/yaml/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/render"
)

// Difference is where the kind's render and `helm template` disagree for
// one values file.
type Difference struct {
	ValuesFile string
	Object     string // kind namespace/name
	Diff       string // what differs (-helm +stencil), or which side lacks the object
}

func (d Difference) String() string {
	return fmt.Sprintf("%s: %s:\n%s", d.ValuesFile, d.Object, d.Diff)
}

// FileResult is the comparison of one values file.
type FileResult struct {
	ValuesFile string
	// Objects are the objects either side renders; Equal, those both
	// render alike.
	Objects, Equal int
	// Generated are the fields whose values the templates generate (or
	// derive from generated ones): they differ from render to render, in
	// Helm's, so they are compared only for being there.
	Generated   int
	Differences []Difference
	// Err: a side failed to render the file (helm template, or stencil:
	// a random function, an object in another namespace).
	Err error
}

// Verify renders each of the chart's values files (values.yaml and
// ci/*values.yaml) with the kind k and with `helm template` (the binary
// helm) of the chart at chartPath, as the release release in namespace,
// and compares them object by object, but for stencil's own labels,
// annotations and ownerReferences and for the namespace Helm leaves out.
// k renders .Release.Service as Helm, so that a checksum of a rendered
// template is Helm's too. A file that fails to render on either side is a
// result with its error; the others are still compared.
func Verify(helm, chartPath string, c *Chart, k *render.Kind, release, namespace string) ([]FileResult, error) {
	served := OptionalServed(k)
	k = k.WithReleaseService("Helm").WithAPIVersions(served)
	cases, err := c.cases()
	if err != nil {
		return nil, err
	}
	var results []FileResult
	for i, vf := range c.ValuesFiles() {
		r := FileResult{ValuesFile: vf}
		theirs, err := helmTemplate(helm, chartPath, c.Files[vf], vf, release, namespace, k.Chart().KubeVersion(), served)
		theirs = flattened(theirs)
		if err != nil {
			r.Err = err
		} else if ours, generated, err := renderTwice(k, release, namespace, cases[i].values); err != nil {
			r.Err = fmt.Errorf("stencil's render: %w", err)
		} else {
			r.Generated = generated
			r.Differences = compare(vf, theirs, ours)
			r.Objects = countObjects(theirs, ours)
			r.Equal = r.Objects - len(r.Differences)
		}
		results = append(results, r)
	}
	return results, nil
}

// renderTwice renders values with k twice, each time generating its
// values afresh, as in a cluster: the fields that differ between the two
// are generated, and are the marker [generatedField] in what it returns.
// It returns how many there are.
func renderTwice(k *render.Kind, release, namespace string, values map[string]any) ([]*unstructured.Unstructured, int, error) {
	cr := NewResource(k.GroupVersionKind(), release, namespace, values)
	first, _, err := renderConverged(k, cr, render.NewGenerated(nil))
	if err != nil || !k.Generates() {
		return first, 0, err
	}
	second, _, err := renderConverged(k, cr, render.NewGenerated(nil))
	if err != nil {
		return nil, 0, err
	}
	n := 0
	for i, o := range first {
		// stencil's own (a hash of the object) differ too, and are left
		// out of the comparison.
		o.SetAnnotations(withoutStencil(o.GetAnnotations()))
		if i < len(second) {
			second[i].SetAnnotations(withoutStencil(second[i].GetAnnotations()))
			o.Object = markGenerated(o.Object, second[i].Object, &n).(map[string]any)
		}
	}
	return first, n, nil
}

// generatedField stands for a generated value in a compared object.
const generatedField = "(generated)"

// markGenerated is a with every field that differs from b's replaced by
// generatedField, counted in n.
func markGenerated(a, b any, n *int) any {
	switch a := a.(type) {
	case map[string]any:
		bm, _ := b.(map[string]any)
		for k, v := range a {
			a[k] = markGenerated(v, bm[k], n)
		}
		return a
	case []any:
		bs, _ := b.([]any)
		if len(bs) != len(a) {
			break
		}
		for i := range a {
			a[i] = markGenerated(a[i], bs[i], n)
		}
		return a
	}
	if reflect.DeepEqual(a, b) {
		return a
	}
	*n++
	return generatedField
}

// likeGenerated is theirs with the fields that ours holds as generated
// replaced by generatedField too, where theirs has them.
func likeGenerated(theirs, ours any) any {
	if ours == generatedField && theirs != nil {
		return generatedField
	}
	switch t := theirs.(type) {
	case map[string]any:
		om, _ := ours.(map[string]any)
		for k, v := range t {
			t[k] = likeGenerated(v, om[k])
		}
	case []any:
		os, _ := ours.([]any)
		for i := range t {
			if i < len(os) {
				t[i] = likeGenerated(t[i], os[i])
			}
		}
	}
	return theirs
}

// countObjects counts the objects either side renders.
func countObjects(sides ...[]*unstructured.Unstructured) int {
	ids := map[string]bool{}
	for _, objs := range sides {
		for _, o := range objs {
			ids[o.GetKind()+" "+o.GetName()] = true
		}
	}
	return len(ids)
}

// helmTemplate runs helm template on the chart at chartPath with the
// values file name (none for values.yaml, the chart's defaults), whose
// content is values.
func helmTemplate(helm, chartPath string, values []byte, name, release, namespace string, kube render.KubeVersion, apiVersions []string) ([]*unstructured.Unstructured, error) {
	args := []string{"template", release, chartPath, "--namespace", namespace, "--skip-tests", "--kube-version", kube.Version}
	for _, v := range apiVersions {
		args = append(args, "--api-versions", v)
	}
	if name != "values.yaml" {
		file := filepath.Join(os.TempDir(), fmt.Sprintf("stencil-values-%d-%s", os.Getpid(), filepath.Base(name)))
		if err := os.WriteFile(file, values, 0o600); err != nil {
			return nil, err
		}
		defer func() { _ = os.Remove(file) }()
		args = append(args, "-f", file)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(helm, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return decodeStream(out)
}

func decodeStream(out []byte) ([]*unstructured.Unstructured, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		o := map[string]any{}
		if err := yaml.Unmarshal(doc, &o); err != nil {
			return nil, err
		}
		if len(o) > 0 {
			objs = append(objs, &unstructured.Unstructured{Object: o})
		}
	}
}

// compare lists the differences between Helm's objects and stencil's.
func compare(valuesFile string, theirs, ours []*unstructured.Unstructured) []Difference {
	byID := func(objs []*unstructured.Unstructured, fill map[string]string) map[string]any {
		out := map[string]any{}
		for _, o := range objs {
			id := o.GetKind() + " " + o.GetName()
			fill[id] = o.GetNamespace()
			out[id] = o.Object
		}
		return out
	}
	theirs = flattened(theirs)
	for _, t := range theirs {
		asOnce(t)
	}
	namespaces := map[string]string{}
	ourObjs := byID(ours, namespaces)
	theirObjs := byID(theirs, map[string]string{})
	var diffs []Difference
	ids := slices.Sorted(slices.Values(append(mapsKeys(ourObjs), mapsKeys(theirObjs)...)))
	for _, id := range slices.Compact(ids) {
		o, t := ourObjs[id], theirObjs[id]
		switch {
		case o == nil:
			diffs = append(diffs, Difference{valuesFile, id, "helm template renders it, stencil does not"})
		case t == nil:
			diffs = append(diffs, Difference{valuesFile, id, "stencil renders it, helm template does not"})
		default:
			ourSide := normalize(o, namespaces[id])
			if d := diffYAML(likeGenerated(normalize(t, namespaces[id]), ourSide), ourSide); d != "" {
				diffs = append(diffs, Difference{valuesFile, id, d})
			}
		}
	}
	return diffs
}

// diffYAML is a unified diff of an object as helm template renders it and
// as stencil does, each as YAML (keys sorted, numbers as JSON reads them):
// "-" lines are Helm's, "+" lines stencil's; "" when the two are equal.
func diffYAML(helm, stencil any) string {
	if reflect.DeepEqual(helm, stencil) {
		return ""
	}
	a, errA := yamlv2.Marshal(sortedKeys(helm))
	b, errB := yamlv2.Marshal(sortedKeys(stencil))
	if err := errors.Join(errA, errB); err != nil {
		return fmt.Sprintf("cannot print the two as YAML: %v", err)
	}
	d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(string(a)), B: difflib.SplitLines(string(b)),
		FromFile: "helm", ToFile: "stencil", Context: 3,
	})
	if err != nil {
		return fmt.Sprintf("cannot diff the two: %v", err)
	}
	return strings.TrimSuffix(d, "\n")
}

// sortedKeys is v, a value as JSON reads it, with each map's keys in
// byte order: the YAML encoder's own order is not the same twice for
// keys such as "01-a" and "0a" (it compares digits as numbers).
func sortedKeys(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(yamlv2.MapSlice, 0, len(v))
		for _, k := range slices.Sorted(maps.Keys(v)) {
			out = append(out, yamlv2.MapItem{Key: k, Value: sortedKeys(v[k])})
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = sortedKeys(x)
		}
		return out
	}
	return v
}

// flattened is objs with each list's items in its place, as Helm
// applies them.
func flattened(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		items, err := render.Flatten(o)
		if err != nil {
			items = []*unstructured.Unstructured{o} // compared as it is
		}
		out = append(out, items...)
	}
	return out
}

// asOnce is a hook's Job of Helm's as stencil runs it once: kept at least
// render.OnceMinTTL seconds after it finishes (see docs/from-helm.md).
func asOnce(o *unstructured.Unstructured) {
	if o.GetKind() != "Job" || o.GetAnnotations()["helm.sh/hook"] == "" {
		return
	}
	if ttl, found, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "ttlSecondsAfterFinished"); found {
		if n, ok := ttl.(float64); ok && n < render.OnceMinTTL {
			_ = unstructured.SetNestedField(o.Object, float64(render.OnceMinTTL), "spec", "ttlSecondsAfterFinished")
		}
		if n, ok := ttl.(int64); ok && n < render.OnceMinTTL {
			_ = unstructured.SetNestedField(o.Object, int64(render.OnceMinTTL), "spec", "ttlSecondsAfterFinished")
		}
	}
}

// normalize is an object without what only stencil adds (its labels and
// annotations, ownerReferences, the managed-by label whose value each
// writes) and with the namespace stencil puts on a namespaced object that
// Helm leaves without one; numbers as JSON reads them.
func normalize(obj any, namespace string) any {
	u := &unstructured.Unstructured{Object: jsonCopy(obj).(map[string]any)}
	u.SetOwnerReferences(nil)
	if namespace != "" {
		u.SetNamespace(namespace)
	}
	u.SetLabels(withoutStencil(u.GetLabels()))
	u.SetAnnotations(withoutStencil(u.GetAnnotations()))
	return u.Object
}

func withoutStencil(m map[string]string) map[string]string {
	for k := range m {
		if strings.Contains(k, "stencil.dev") || k == "app.kubernetes.io/managed-by" {
			delete(m, k)
		}
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

func jsonCopy(v any) any {
	data, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(data, &out)
	return out
}
