package stenciltest

import (
	"path/filepath"
	"testing"

	"github.com/stencil-operator/stencil/internal/dev/chartimport"
	"github.com/stencil-operator/stencil/internal/dev/localcluster"
	"github.com/stencil-operator/stencil/pkg/stencil"
	"github.com/stencil-operator/stencil/render"
)

// ChartRendersAsHelm checks a kind made by `stencil import chart` against
// the chart it came from (a folder or archive): for each of the chart's
// values files (values.yaml and ci/*values.yaml), the kind's render is
// what `helm template` renders, object by object, but for stencil's own
// labels, annotations and ownerReferences. It runs the helm that `make
// tools` builds (bin/helm) and fails the test with each difference:
//
//	func TestShopRendersAsHelm(t *testing.T) {
//		stenciltest.ChartRendersAsHelm(t, project, "Shop", "charts/shop")
//	}
func ChartRendersAsHelm(t testing.TB, p stencil.Project, kind, chart string) {
	t.Helper()
	k := chartKind(t, p, kind)
	c, err := chartimport.Load(chart)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := localcluster.BinDir()
	if err != nil {
		t.Fatalf("finding bin/helm (make tools builds it): %v", err)
	}
	results, err := chartimport.Verify(filepath.Join(bin, "helm"), chart, c, k, "release", "default")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Err != nil {
			t.Errorf("%s: %v", r.ValuesFile, r.Err)
		}
		for _, d := range r.Differences {
			t.Errorf("%s", d)
		}
		t.Logf("%s: %d of %d objects as helm template renders them", r.ValuesFile, r.Equal, r.Objects)
	}
}

// chartKind is p's kind named kind, loaded; a chart kind.
func chartKind(t testing.TB, p stencil.Project, kind string) *render.Kind {
	t.Helper()
	for _, def := range p.Kinds {
		if def.GroupVersionKind.Kind != kind {
			continue
		}
		k, err := render.Load(render.Definition(def))
		if err != nil {
			t.Fatal(err)
		}
		if k.Chart() == nil {
			t.Fatalf("kind %s was not made from a chart (no _chart.yaml in its folder)", kind)
		}
		return k
	}
	t.Fatalf("the project has no kind %s", kind)
	return nil
}
