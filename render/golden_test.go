package render_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	shipped "github.com/stencil-operator/stencil/internal/testing/samples"
	"github.com/stencil-operator/stencil/internal/testing/testkind"
	"github.com/stencil-operator/stencil/render"
	"github.com/stencil-operator/stencil/render/kindtest"
	"github.com/stencil-operator/stencil/render/schema"
	"github.com/stencil-operator/stencil/templates"
)

var update = flag.Bool("update", false, "rewrite the golden files (expected.yaml, error.txt) from the current output")

// TestGolden runs every kind's template tests (templates/<kind>/tests/, see
// package kindtest), validating every object against its type's schema, as
// `stencil test` does.
func TestGolden(t *testing.T) {
	v := validator(t)
	kinds := goldenKinds()
	for _, dirName := range slices.Sorted(maps.Keys(kinds)) {
		kind, err := render.Load(kinds[dirName])
		if err != nil {
			t.Fatal(err)
		}
		kind = kind.WithLimits(goldenLimits)
		for _, c := range cases(t, dirName, kinds[dirName].Templates) {
			t.Run(dirName+"/"+c.Name, func(t *testing.T) {
				check(t, dirName, c, kindtest.RunKind(kind, c, v))
			})
		}
	}
}

// goldenLimits are the default limits but for the render time, which is
// wall time: a test of what the templates render must not fail because a
// loaded machine ran it slowly (seen: 1 s exceeded under ci-loaded). The
// limits have tests of their own.
var goldenLimits = func() render.Limits {
	l := render.DefaultLimits
	l.Time = time.Minute
	return l
}()

// goldenKinds are the kinds with golden cases, the shipped ones and the test
// kind, by the name of their folder.
func goldenKinds() map[string]render.Definition {
	kinds := map[string]render.Definition{"widget": testkind.Widget()}
	for _, def := range shipped.Definitions() {
		kinds[strings.ToLower(def.GroupVersionKind.Kind)] = def
	}
	return kinds
}

// casesDir is the folder on disk of a kind's or decorator's cases.
func casesDir(dirName string) string {
	if dirName == "widget" {
		return filepath.Join("..", "internal", "testing", "testkind", "templates", "widget", kindtest.Folder)
	}
	return filepath.Join("..", "templates", dirName, kindtest.Folder)
}

func cases(t *testing.T, dirName string, folder fs.FS) []kindtest.Case {
	t.Helper()
	cs, err := kindtest.Cases(folder)
	if err != nil || len(cs) == 0 {
		t.Fatalf("no template tests for %s: %v", dirName, err)
	}
	return cs
}

// check fails t with the outcome's error, or with -update writes its output
// into the case's folder.
func check(t *testing.T, dirName string, c kindtest.Case, out kindtest.Outcome) {
	t.Helper()
	if *update && out.Updatable(c) {
		if err := os.WriteFile(filepath.Join(casesDir(dirName), out.Case, out.Golden), out.Got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if out.Err != nil {
		t.Errorf("%s/%s/%s: %v (run `go test ./render -update` to rewrite golden files)", casesDir(dirName), out.Case, out.Golden, out.Err)
	}
}

// validator checks objects against the built-in schemas and every CRD in
// the repository: the kinds' (config/crd/bases), the third-party types'
// their templates write (config/crd/external) and the test kind's. It
// defaults each case's input with its kind's CRD, as `stencil test` does.
func validator(t *testing.T) *schema.Validator {
	t.Helper()
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, glob := range []string{"../config/crd/bases/*.yaml", "../config/crd/external/*.yaml", "../internal/testing/testkind/crd/*.yaml"} {
		files, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			crds = append(crds, readCRDs(t, f)...)
		}
	}
	v, err := schema.New(crds...)
	if err != nil {
		t.Fatal(err)
	}
	return v
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
	files, err := filepath.Glob(filepath.Join(casesDir("widget"), "*", "expected.yaml"))
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

// TestDecoratorGolden runs every shipped decorator's template tests
// (templates/<decorator>/tests/): input.yaml is the parent as the cluster
// holds it, observed.yaml (optional) the observed objects by their name in
// the templates; expected.yaml is what is set on the parent and then the
// children.
func TestDecoratorGolden(t *testing.T) {
	decorators, err := shipped.LoadDecorators()
	if err != nil {
		t.Fatal(err)
	}
	v := validator(t)
	for _, d := range decorators {
		for _, c := range cases(t, d.Name(), templates.Kind(d.Name())) {
			t.Run(d.Name()+"/"+c.Name, func(t *testing.T) {
				check(t, d.Name(), c, kindtest.RunDecorator(d, c, v))
			})
		}
	}
}

// readCRDs reads the CustomResourceDefinitions of a file, one or more (a
// third-party project often publishes its CRDs as one file).
func readCRDs(t *testing.T, path string) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return crds
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(doc, crd); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if crd.Kind == "CustomResourceDefinition" {
			crds = append(crds, crd)
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
