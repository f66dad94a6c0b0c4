package engine

import (
	"errors"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// Hand-over fields (v1alpha1.AnnotationHandOver): a template sets them
// until another field manager takes one; from then on stencil leaves it to
// that manager. It is never drift, and stencil's applies leave it out, so
// that server-side apply neither reverts nor removes it.

// HandOver is the set of fields d's template hands over; nil when none.
func HandOver(d *unstructured.Unstructured) *fieldpath.Set {
	value := d.GetAnnotations()[v1alpha1.AnnotationHandOver]
	if value == "" {
		return nil
	}
	set := &fieldpath.Set{}
	for spec := range strings.SplitSeq(value, ",") {
		var path fieldpath.Path
		for name := range strings.SplitSeq(strings.TrimSpace(spec), ".") {
			if name != "" {
				path = append(path, fieldpath.PathElement{FieldName: &name})
			}
		}
		if len(path) > 0 {
			set.Insert(path)
		}
	}
	return set
}

// WithoutHandedOver is body without the fields at or under the hand-over
// paths that another manager holds now (a copy when anything is left out).
// Only those very fields go, never a whole subtree: what stencil alone
// still sets under a handed-over map stays in the apply, so server-side
// apply keeps it. The key fields of list items stay too.
func WithoutHandedOver(body, d *unstructured.Unstructured, entries []metav1.ManagedFieldsEntry) (*unstructured.Unstructured, error) {
	fields := HandOver(d)
	if fields == nil {
		return body, nil
	}
	theirs, err := othersFields(entries, FieldManager)
	if err != nil || theirs.Empty() {
		return body, err
	}
	taken := theirs.Leaves().Difference(theirs.Leaves().RecursiveDifference(fields))
	out := body
	taken.Iterate(func(p fieldpath.Path) {
		if isItemKey(p) || isMetadata(p) {
			return
		}
		if _, found := valueAt(out.Object, p); !found {
			return
		}
		if out == body {
			out = body.DeepCopy()
		}
		removeAt(out.Object, p)
	})
	return out, nil
}

// ErrNotOurs says that an object in the way of a rendered one is not the
// resource's.
var ErrNotOurs = errors.New("not this resource's")

// PreviewBody is what a reconcile would apply for d onto live (nil: not
// there yet), for previews of an apply: nothing (false) for a create-only
// object that exists, or one on its way out; an error for an object that
// is not the resource's (stencil leaves it alone: OwnershipConflict); else
// d without the fields handed over to another manager and, under drift
// policy Report, without those other managers hold.
func PreviewBody(d, live *unstructured.Unstructured, report bool) (*unstructured.Unstructured, bool, error) {
	switch {
	case live == nil:
		return d, true, nil
	case !ownedFor(live, d) && !adoptedBy(live, d):
		return nil, false, fmt.Errorf("%w: %s (%s); stencil leaves it alone, with reason %s", ErrNotOurs, conflictWith(d, live).object, holderOf(live), v1alpha1.ReasonOwnershipConflict)
	case CreateOnly(d) || live.GetDeletionTimestamp() != nil:
		return nil, false, nil
	}
	body := d
	var err error
	if report {
		body, _, err = withoutOthersFields(d, live.GetManagedFields(), FieldManager)
	}
	if err == nil {
		body, err = WithoutHandedOver(body, d, live.GetManagedFields())
	}
	return body, err == nil, err
}
