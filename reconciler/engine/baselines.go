package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// A restarted process (or a newly elected leader) knows no baselines, and
// learning one costs a server-side dry-run apply per object: 3,000 requests
// through every admission webhook for 1,000 converged resources, after
// every restart. So each resource's status records a digest of the
// baselines of its objects (status.ownedFields): the fields our manager
// owned on each right after our last apply, with the render it applied. A
// new process that finds the live objects' records with the same digest
// knows that nothing was taken from our manager since, and takes the live
// records as the baselines, without a request. When the digest differs (a
// field was taken, or stencil stopped between an apply and its status
// write), it learns the baselines as before, with dry runs.

// OwnedDigest is the digest of the baselines of desired's objects, or ""
// when one of them has none for its render (it was not applied: a
// conflict, or the cache still lagging) or holds fields left to other
// managers (a restored baseline would not know them).
func (a *Applier) OwnedDigest(desired []*unstructured.Unstructured) string {
	h := sha256.New()
	for _, d := range desired {
		if CreateOnly(d) {
			continue // judged against what this process created, if anything
		}
		b, ok := a.baselines.Load(KeyOf(d))
		if !ok || b.hash != d.GetAnnotations()[v1alpha1.AnnotationDesiredHash] {
			return ""
		}
		if leftOut := b.leftOut; leftOut != nil && !leftOut.Empty() {
			return "" // fields left to others (policy Report) are drift the records do not show
		}
		WriteOwned(h, d, b.hash, b.owned)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))[:32]
}

// WriteOwned writes d's part of the owned fields' digest (see
// OwnedDigest) to h: its type, namespace and name, desiredHash, and owned,
// our manager's managedFields record.
func WriteOwned(h hash.Hash, d *unstructured.Unstructured, desiredHash string, owned []string) {
	_, _ = fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%d\n", d.GroupVersionKind(), d.GetNamespace(), d.GetName(), desiredHash, len(owned))
	for _, r := range owned {
		_, _ = fmt.Fprintf(h, "%d\x00%s\n", len(r), r)
	}
}

// restoreBaselines takes, for a process that knows none of desired's
// baselines, the live objects' records as their baselines when their digest
// is recorded, the digest status.ownedFields holds. It sends no request:
// the live objects come from the cache.
func (a *Applier) restoreBaselines(ctx context.Context, recorded string, desired []*unstructured.Unstructured) {
	if recorded == "" || a.knowsBaselines(desired) {
		return
	}
	h := sha256.New()
	found := make([]baseline, len(desired))
	for i, d := range desired {
		if CreateOnly(d) {
			continue
		}
		live, err := a.cached(ctx, d)
		if err != nil || !ownedFor(live, d) {
			return
		}
		found[i] = baseline{hash: live.GetAnnotations()[v1alpha1.AnnotationDesiredHash], owned: OwnedRecord(live.GetManagedFields(), FieldManager)}
		WriteOwned(h, d, found[i].hash, found[i].owned)
	}
	if "sha256:"+hex.EncodeToString(h.Sum(nil))[:32] != recorded {
		return
	}
	for i, d := range desired {
		if !CreateOnly(d) {
			a.baselines.LoadOrStore(KeyOf(d), found[i]) // never over one this process learnt
		}
	}
}

// knowsBaselines: this process has a baseline of every one of desired's
// objects (but create-only ones), for any render.
func (a *Applier) knowsBaselines(desired []*unstructured.Unstructured) bool {
	return !slices.ContainsFunc(desired, func(d *unstructured.Unstructured) bool {
		_, ok := a.baselines.Load(KeyOf(d))
		return !ok && !CreateOnly(d)
	})
}
