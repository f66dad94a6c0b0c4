package main

import (
	"context"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stencil-operator/stencil/internal/testing/testutil"
)

// The Helm operator (operator-sdk's, from operator-framework/helm-operator-
// plugins) drives the chart hack/bench/peers/helm/myweb, which renders what
// templates/myweb renders, for kind HelmWeb (hack/bench/peers/helm/crds),
// whose spec is MyWeb's: the operator replaces the whole status with its
// own, which MyWeb's schema does not hold.

// helmGVK is the kind the Helm operator reconciles.
var helmGVK = schema.GroupVersionKind{Group: "helm.bench.stencil.dev", Version: "v1alpha1", Kind: "HelmWeb"}

// helmDir holds the CRD, the chart and watches.yaml, relative to the
// repository root (the Helm operator reads the chart's path in watches.yaml
// relative to its working directory, the bench's).
const helmDir = "hack/bench/peers/helm"

// helmContender runs the Helm operator with its defaults but for the
// workers: stencil's 8, not one per CPU.
func helmContender(cfg config) *contender {
	web := webKind{
		gvk: helmGVK,
		prepare: func(ctx context.Context, e *env) error {
			return testutil.InstallCRDs(ctx, e.admin, os.DirFS(filepath.Join(helmDir, "crds")))
		},
		converged: deployed,
	}
	c := &contender{name: "Helm operator", user: "helm-operator", binary: cfg.helmOperator, web: web,
		args: func(metrics, _ string) []string {
			return []string{"run", "--watches-file=" + filepath.Join(helmDir, "watches.yaml"), "--leader-elect=false",
				"--metrics-bind-address=" + metrics, "--health-probe-bind-address=0", "--max-concurrent-reconciles=8"}
		}}
	// The Helm operator names its controller after the kind.
	c.reconciles, c.depth = controllerRuntimeMetrics("helmweb-controller")
	return c
}

// deployed: the Helm operator installed the resource's release (its
// Deployed condition is True).
func deployed(u *unstructured.Unstructured) bool {
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conditions {
		if c, ok := c.(map[string]any); ok && c["type"] == "Deployed" && c["status"] == "True" {
			return true
		}
	}
	return false
}
