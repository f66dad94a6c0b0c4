// Command chartweb is stencil with one kind, ChartWeb, imported at start
// from the chart the Helm operator runs in `make bench-peers`
// (hack/bench/peers/helm/myweb, read from the working directory, the
// repository's root): the imported-chart contender, beside the Helm
// operator, on the same chart.
package main

import (
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stencil-operator/stencil/internal/dev/chartimport"
	"github.com/stencil-operator/stencil/pkg/stencil"
)

// GVK is the imported kind.
var GVK = schema.GroupVersionKind{Group: "chart.bench.stencil.dev", Version: "v1alpha1", Kind: "ChartWeb"}

// Chart is the chart's folder, relative to the repository's root.
const Chart = "hack/bench/peers/helm/myweb"

func main() {
	def, err := chartimport.Definition(Chart, GVK)
	if err != nil {
		fmt.Fprintln(os.Stderr, "importing the chart:", err)
		os.Exit(1)
	}
	stencil.Main(stencil.Project{Name: "chartweb", Kinds: []stencil.Kind{stencil.Kind(def)}})
}
