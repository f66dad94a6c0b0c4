package reconciler

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// BenchmarkComputeStatus is building the status of a converged 3-object
// resource.
func BenchmarkComputeStatus(b *testing.B) {
	var objs []*unstructured.Unstructured
	for _, kind := range []string{"ConfigMap", "Deployment", "Service"} {
		o := &unstructured.Unstructured{}
		o.SetAPIVersion("v1")
		o.SetKind(kind)
		o.SetNamespace("ns")
		o.SetName("web")
		objs = append(objs, o)
	}
	res := &result{generation: 1, desired: objs}
	before := computeStatus(&v1alpha1.Status{}, res, v1alpha1.DriftCorrect)
	b.ReportAllocs()
	for b.Loop() {
		computeStatus(before, res, v1alpha1.DriftCorrect)
	}
}
