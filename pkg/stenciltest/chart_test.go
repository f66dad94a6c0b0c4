package stenciltest_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stencil-operator/stencil/internal/dev/chartimport"
	"github.com/stencil-operator/stencil/pkg/stencil"
	"github.com/stencil-operator/stencil/pkg/stenciltest"
)

// TestChartRendersAsHelm runs the helper a project's tests call on the
// test chart, imported.
func TestChartRendersAsHelm(t *testing.T) {
	const chart = "../../internal/dev/chartimport/testdata/charts/shop"
	gvk := schema.GroupVersionKind{Group: "shops.example.com", Version: "v1alpha1", Kind: "Shop"}
	def, err := chartimport.Definition(chart, gvk)
	if err != nil {
		t.Fatal(err)
	}
	stenciltest.ChartRendersAsHelm(t, stencil.Project{Name: "shop", Kinds: []stencil.Kind{stencil.Kind(def)}}, "Shop", chart)
}
