package main

import (
	"context"
	"fmt"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/internal/dev/chartimport"
)

// The imported-chart contender is stencil running the chart the Helm
// operator runs (hack/bench/peers/helm/myweb), imported as the kind
// ChartWeb (hack/bench/chartweb, which imports it at start as `stencil
// import chart` would), with MyWeb's spec as its values.

// chartGVK is the imported kind.
var chartGVK = schema.GroupVersionKind{Group: "chart.bench.stencil.dev", Version: "v1alpha1", Kind: "ChartWeb"}

// chartContender runs hack/bench/chartweb (built into the bin folder).
func chartContender(cfg config) *contender {
	web := webKind{
		gvk: chartGVK,
		prepare: func(ctx context.Context, e *env) error {
			def, err := chartimport.Definition(filepath.Join(helmDir, "myweb"), chartGVK)
			if err != nil {
				return fmt.Errorf("importing the chart: %w", err)
			}
			crd, err := chartimport.CRD(def, "chartwebs")
			if err != nil {
				return err
			}
			if err := e.admin.Create(ctx, crd); err != nil {
				return fmt.Errorf("creating the ChartWeb CRD: %w", err)
			}
			return probeKind(ctx, e.admin, webKind{gvk: chartGVK})
		},
		converged: readyForGeneration,
	}
	c := &contender{name: "stencil (imported chart)", user: "stencil-chart", binary: filepath.Join(cfg.bin, "chartweb"), web: web, pprof: true,
		args: func(metrics, pprof string) []string {
			return append([]string{"--metrics-bind-address=" + metrics, "--pprof-bind-address=" + pprof, "--health-probe-bind-address=0"}, cfg.stencilArgs...)
		}}
	c.reconciles, c.depth = controllerRuntimeMetrics("chartweb")
	return c
}

// readyForGeneration: a stencil resource's Ready condition is True (or
// Progressing) for its current generation, as isReady says of a MyWeb.
func readyForGeneration(u *unstructured.Unstructured) bool {
	observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conditions {
		c, ok := c.(map[string]any)
		if !ok || c["type"] != v1alpha1.ConditionReady {
			continue
		}
		gen, _ := c["observedGeneration"].(int64)
		return (c["status"] == "True" || c["reason"] == v1alpha1.ReasonProgressing) && gen == u.GetGeneration() && observed == u.GetGeneration()
	}
	return false
}
