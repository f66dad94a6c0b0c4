package render_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	shipped "github.com/stencil-operator/stencil/internal/kinds"
	"github.com/stencil-operator/stencil/internal/testkind"
	"github.com/stencil-operator/stencil/render"
)

var update = flag.Bool("update", false, "rewrite the golden files (expected.yaml, error.txt) from the current output")

// TestGolden renders every testdata/<kind>/<case>/input.yaml and compares
// the result with expected.yaml, or the error with error.txt.
func TestGolden(t *testing.T) {
	for dirName, def := range goldenKinds() {
		kind, err := render.Load(def)
		if err != nil {
			t.Fatal(err)
		}
		cases, err := filepath.Glob(filepath.Join("testdata", dirName, "*"))
		if err != nil || len(cases) == 0 {
			t.Fatalf("no golden cases for %s: %v", dirName, err)
		}
		for _, dir := range cases {
			t.Run(dirName+"/"+filepath.Base(dir), func(t *testing.T) {
				cr := readCR(t, kind, filepath.Join(dir, "input.yaml"))
				objs, err := kind.Render(cr)
				if err != nil {
					compareGolden(t, filepath.Join(dir, "error.txt"), []byte(err.Error()+"\n"))
					return
				}
				compareGolden(t, filepath.Join(dir, "expected.yaml"), toYAMLStream(t, objs))
			})
		}
	}
}

// goldenKinds are the kinds with golden cases, the shipped ones and the test
// kind, by the name of their folder in testdata.
func goldenKinds() map[string]render.Definition {
	kinds := map[string]render.Definition{"widget": testkind.Widget()}
	for _, def := range shipped.Definitions() {
		kinds[strings.ToLower(def.GroupVersionKind.Kind)] = def
	}
	return kinds
}

func readCR(t *testing.T, kind *render.Kind, path string) v1alpha1.Object {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cr := kind.New()
	if err := yaml.UnmarshalStrict(data, cr); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return cr
}

func toYAMLStream(t *testing.T, objs []*unstructured.Unstructured) []byte {
	t.Helper()
	var buf bytes.Buffer
	for i, o := range objs {
		if i > 0 {
			buf.WriteString("---\n")
		}
		out, err := yaml.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(out)
	}
	return buf.Bytes()
}

func compareGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run `go test ./render -update` to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run `go test ./render -update` and review the diff):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// engineGolden is a digest of the test kind's golden renders, recorded with
// render.Engine: the test kind's templates change rarely, so a change of
// its renders is a change of the render code, which must bump
// render.Engine (see there).
const engineGolden = "engine 1: sha256:4758a89ba310"

// TestEngineVersion fails when the test kind's renders change and
// render.Engine did not: a new release would otherwise change every
// resource's objects at once, with no paced rollout.
func TestEngineVersion(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "widget", "*", "expected.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden renders of the test kind: %v", err)
	}
	h := sha256.New()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = fmt.Fprintf(h, "%s\x00%s\x00", filepath.Base(filepath.Dir(f)), data)
	}
	got := "engine " + render.Engine + ": sha256:" + hex.EncodeToString(h.Sum(nil))[:12]
	if got != engineGolden {
		t.Errorf("the test kind renders otherwise (%s, recorded %q). If the render code changed what unchanged templates render, bump render.Engine; then (or if only the test kind's templates changed) set engineGolden to %q.", got, engineGolden, got)
	}
}

// TestDecoratorGolden renders every shipped decorator's
// testdata/<decorator>/<case>/: input.yaml is the parent as the cluster
// holds it, observed.yaml (optional) the observed objects by their name in
// the templates; expected.yaml is what is set on the parent and then the
// children.
func TestDecoratorGolden(t *testing.T) {
	decorators, err := shipped.LoadDecorators()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range decorators {
		cases, err := filepath.Glob(filepath.Join("testdata", d.Name(), "*"))
		if err != nil || len(cases) == 0 {
			t.Fatalf("no golden cases for %s: %v", d.Name(), err)
		}
		for _, dir := range cases {
			t.Run(d.Name()+"/"+filepath.Base(dir), func(t *testing.T) {
				parent := &unstructured.Unstructured{}
				readYAML(t, filepath.Join(dir, "input.yaml"), &parent.Object)
				observed := map[string][]*unstructured.Unstructured{}
				if _, err := os.Stat(filepath.Join(dir, "observed.yaml")); err == nil {
					var lists map[string][]map[string]any
					readYAML(t, filepath.Join(dir, "observed.yaml"), &lists)
					for as, list := range lists {
						for _, o := range list {
							observed[as] = append(observed[as], &unstructured.Unstructured{Object: o})
						}
					}
				}
				patch, children, err := d.Render(parent, observed)
				if err != nil {
					compareGolden(t, filepath.Join(dir, "error.txt"), []byte(err.Error()+"\n"))
					return
				}
				if patch != nil {
					children = append([]*unstructured.Unstructured{patch}, children...)
				}
				compareGolden(t, filepath.Join(dir, "expected.yaml"), toYAMLStream(t, children))
			})
		}
	}
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
