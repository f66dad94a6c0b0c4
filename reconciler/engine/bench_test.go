package engine

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// managedFields of a typical applied Deployment, plus another manager's
// status entry, as the drift check reads them from the cache.
var benchManagedFields = []metav1.ManagedFieldsEntry{
	{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:annotations":{"f:stencil.dev/desired-hash":{},"f:stencil.dev/owner":{}},"f:labels":{"f:app.kubernetes.io/managed-by":{},"f:stencil.dev/owner-uid":{}},"f:ownerReferences":{"k:{\"uid\":\"u\"}":{}}},"f:spec":{"f:replicas":{},"f:selector":{},"f:template":{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:image":{},"f:name":{},"f:ports":{"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:protocol":{}}}}}}}}}`)},
	{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:availableReplicas":{},"f:replicas":{}}}`)},
}

// BenchmarkDriftCheck is the per-object cost of a converged reconcile:
// compare our manager's record in the cached object with the baseline.
func BenchmarkDriftCheck(b *testing.B) {
	base := OwnedRecord(benchManagedFields, FieldManager)
	b.ReportAllocs()
	for b.Loop() {
		missing, err := MissingFields(base, OwnedRecord(benchManagedFields, FieldManager), nil)
		if err != nil {
			b.Fatal(err)
		}
		if !missing.Empty() {
			b.Fatal("drift in a converged object")
		}
	}
}

// BenchmarkDriftFound is the cost when the record changed: both are parsed.
func BenchmarkDriftFound(b *testing.B) {
	base := OwnedRecord(benchManagedFields, FieldManager)
	taken := slices.Clone(benchManagedFields)
	taken[0].FieldsV1 = metav1.NewFieldsV1(`{"f:metadata":{"f:annotations":{"f:stencil.dev/desired-hash":{},"f:stencil.dev/owner":{}}}}`)
	b.ReportAllocs()
	for b.Loop() {
		missing, err := MissingFields(base, OwnedRecord(taken, FieldManager), nil)
		if err != nil {
			b.Fatal(err)
		}
		if missing.Empty() {
			b.Fatal("no drift found")
		}
	}
}
