package engine

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// Held is an object of an owner whose new render waits (a paced rollout),
// as the engine's field manager left it; Keep holds it there.
type Held struct {
	// Owned is our manager's managedFields record when it was remembered.
	Owned []string
	// Obj holds those fields with their values, and the object's UID (a
	// precondition of the apply): an apply of it restores them, and claims
	// nothing more. Nil when the type has no built-in schema.
	Obj *unstructured.Unstructured
	// Ref is the object's identity, labels and annotations; Desired the
	// values drift reports compare with (Obj, or the whole object when
	// there is no schema).
	Ref, Desired *unstructured.Unstructured
}

// Keep reports the fields of h that our manager no longer owns on live,
// but those the template hands over, and applies h again (without the
// handed-over fields another manager took) when correct says so and h can
// be (see Held.Obj), unless a fight over the object defers it; mayWrite,
// when set, is asked first (the leader fence). It returns the drift it
// found (nil: none), reverted or not.
func (a *Applier) Keep(ctx context.Context, h Held, live client.Object, correct bool, mayWrite func() error) (*v1alpha1.ObjectDrift, error) {
	missing, err := MissingFields(h.Owned, OwnedRecord(live.GetManagedFields(), FieldManager), nil)
	if err != nil || missing.Empty() {
		return nil, err
	}
	if over := HandOver(h.Ref); over != nil {
		missing = missing.RecursiveDifference(over)
	}
	report, err := a.Report(ctx, h.Desired, missing)
	if err != nil || len(report.Fields) == 0 {
		return nil, err
	}
	key, now := KeyOf(h.Ref), time.Now()
	if f, fighting := a.fights.Fighting(key, now); !correct || h.Obj == nil || fighting && now.Before(f.Until) {
		return &report, nil // left as it is: reported
	}
	if mayWrite != nil {
		if err := mayWrite(); err != nil {
			return nil, err
		}
	}
	body, err := WithoutHandedOver(h.Obj.DeepCopy(), HandOver(h.Ref), live.GetManagedFields())
	if err != nil {
		return nil, err
	}
	if _, err := a.applyOne(ctx, body, nil); err != nil {
		// Replaced or gone since the cache showed it: the UID in the body
		// makes the API server refuse (a conflict, or metadata.uid
		// immutable); the retry looks again.
		if apierrors.IsConflict(err) || apierrors.IsInvalid(err) && strings.Contains(err.Error(), "metadata.uid") {
			return nil, fmt.Errorf("%w: %w", ErrChangedWhileRead, err)
		}
		return nil, err
	}
	report.Reverted = true
	a.fights.Corrected(key, report, now)
	return &report, nil
}
