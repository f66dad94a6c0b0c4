package chartimport

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// helmBinary is the pinned helm (hack/tools), which make test builds.
func helmBinary(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("STENCIL_BIN_DIR")
	if dir == "" {
		dir = "../../bin"
	}
	helm, err := filepath.Abs(filepath.Join(dir, "helm"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(helm); err != nil {
		t.Fatalf("no pinned helm (make tools builds it): %v", err)
	}
	return helm
}

const shopChart = "testdata/charts/shop"

// TestShopRendersAsHelmDoes imports the test chart (hooks, .Release,
// .Chart, .Capabilities, tpl, required, empty-map values, nested defaults,
// a null that removes a default, a subchart with a condition) and checks
// the kind's render against helm template, object by object, for each of
// its values files.
func TestShopRendersAsHelmDoes(t *testing.T) {
	c, err := Load(shopChart)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Convert(c)
	if err != nil {
		t.Fatal(err)
	}
	gvk := schema.GroupVersionKind{Group: "shops.example.com", Version: "v1alpha1", Kind: "Shop"}
	cases, err := c.cases()
	if err != nil {
		t.Fatal(err)
	}
	decl, err := Declare(gvk, f, cases.values())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("_kind.yaml:\n%s", decl)
	for _, n := range f.Notes {
		t.Logf("note: %s", n)
	}
	k, err := Kind(gvk, f, decl)
	if err != nil {
		t.Fatal(err)
	}
	results, err := Verify(helmBinary(t), shopChart, c, k, "rel", "ns1")
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 4 {
		t.Errorf("%d values files compared, want 4 (values.yaml and ci/*)", len(results))
	}
	for _, r := range results {
		switch {
		case r.Err != nil:
			t.Errorf("%s: %v", r.ValuesFile, r.Err)
		case r.Objects < 4:
			t.Errorf("%s: %d objects compared; the test chart renders more", r.ValuesFile, r.Objects)
		}
		for _, d := range r.Differences {
			t.Errorf("%s", d)
		}
	}
}
