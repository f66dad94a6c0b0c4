package chartimport

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-cmp/cmp"
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

// Verify renders each of the chart's values files (paths inside the chart
// folder chartDir) with the kind k and with `helm template` (the binary
// helm), as the release release in namespace, and compares them object by
// object, but for stencil's own labels, annotations and ownerReferences
// and for the namespace Helm leaves out. k renders .Release.Service as
// Helm, so that a checksum of a rendered template is Helm's too.
func Verify(helm, chartPath string, c *Chart, k *render.Kind, release, namespace string) ([]Difference, error) {
	k = k.WithReleaseService("Helm")
	cases, err := c.cases()
	if err != nil {
		return nil, err
	}
	var diffs []Difference
	for i, vf := range c.ValuesFiles() {
		ours, err := Render(k, release, namespace, cases[i].values)
		if err != nil {
			return nil, fmt.Errorf("%s: stencil's render: %w", vf, err)
		}
		theirs, err := helmTemplate(helm, chartPath, c.Files[vf], vf, release, namespace, k.KubeVersion())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", vf, err)
		}
		diffs = append(diffs, compare(vf, theirs, ours)...)
	}
	return diffs, nil
}

// helmTemplate runs helm template on the chart at chartPath with the
// values file name (none for values.yaml, the chart's defaults), whose
// content is values.
func helmTemplate(helm, chartPath string, values []byte, name, release, namespace string, kube render.KubeVersion) ([]*unstructured.Unstructured, error) {
	args := []string{"template", release, chartPath, "--namespace", namespace, "--skip-tests", "--kube-version", kube.Version}
	if name != "values.yaml" {
		file := filepath.Join(os.TempDir(), fmt.Sprintf("stencil-values-%d-%s", os.Getpid(), filepath.Base(name)))
		if err := os.WriteFile(file, values, 0o600); err != nil {
			return nil, err
		}
		defer os.Remove(file)
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
			if d := cmp.Diff(normalize(t, namespaces[id]), normalize(o, namespaces[id])); d != "" {
				diffs = append(diffs, Difference{valuesFile, id, d})
			}
		}
	}
	return diffs
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
