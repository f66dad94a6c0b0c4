package reconciler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/reconciler/engine"
)

// Timings of the apply phase.
const (
	// A resource in an ownership conflict looks again after as long as the
	// conflict has lasted, at least conflictRetry and at most
	// maxConflictRetry, with jitter: an object that is not stencil's sends
	// no event when it goes or is annotated for adoption, and many
	// resources in conflict must not look all at once.
	conflictRetry    = 5 * time.Second
	maxConflictRetry = time.Minute
	// After another writer changed an object while stencil wrote it, the
	// resource is reconciled again after rewriteBase, doubling while it
	// keeps happening, up to rewriteMax.
	rewriteBase = 5 * time.Millisecond
	rewriteMax  = time.Minute
	// recreateBackstop: after deleting objects to create them anew, look
	// again this soon even if the deletions' events were missed.
	recreateBackstop = 5 * time.Second
)

func newRewrites() workqueue.TypedRateLimiter[types.NamespacedName] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](rewriteBase, rewriteMax)
}

// nextLook is when a reconcile that succeeded looks again: when a
// correction that waits because of a fight may go ahead, and at
// cacheBackstop when it found the cache behind an earlier apply; else never
// (0). An apply needs no look again: recheckUnseen wakes the resource if
// the watch does not show the apply.
func nextLook(res *result, waiting bool) time.Duration {
	var next time.Duration
	if waiting {
		next = cacheBackstop
	}
	for _, d := range res.fights {
		next = soonest(next, max(time.Until(d.Until), time.Millisecond))
	}
	return next
}

// leaveBlocked is the failure that tells of the objects the apply could not
// bring to their desired state (nil: none), and when to look again (the
// soonest of what each needs); after any of them nothing is pruned. Objects with immutable fields wait
// for someone to act (a retry cannot help; a change of spec or template, or
// the object's deletion, brings the resource back). Objects deleted to be
// created anew come back with their deletions' events, or the backstop.
// Objects in the way wait for their holder: at once when a cached holder is
// deleted (waiters), else after a backoff; a conflict with an object on its
// way out (a deleted predecessor's) resolves itself, so it is not Stalled.
func (r *Reconciler) leaveBlocked(ctx context.Context, cr v1alpha1.Object, res *result, out engine.ApplyOutcome) (time.Duration, *failure) {
	log := ctrl.LoggerFrom(ctx)
	nn := client.ObjectKeyFromObject(cr)
	var retry time.Duration
	var blocked *failure
	immutable, recreating, conflicts, rejected := out.Immutable(), out.Recreating(), out.Conflicts(), out.Rejected()
	if len(immutable) > 0 {
		log.Info("The API server refused to change immutable fields; nothing pruned", "objects", len(immutable))
		blocked = blocked.and(v1alpha1.ReasonImmutableField, true, errors.Join(immutable...))
	}
	if len(recreating) > 0 {
		for _, o := range recreating {
			log.Info("Deleted an object to create it anew", "object", o)
			r.recorder.Eventf(cr, nil, corev1.EventTypeNormal, "Recreated", "Recreate", "Deleted %s; stencil creates it anew", o)
		}
		blocked = blocked.and(v1alpha1.ReasonRecreating, false, fmt.Errorf("deleted %s; stencil creates them anew", strings.Join(recreating, ", ")))
		retry = recreateBackstop
	}
	if len(conflicts) > 0 {
		for _, c := range conflicts {
			r.waiters.Add(c.ID, nn)
		}
		log.Info("Left objects that are not this resource's untouched; nothing pruned", "conflicts", len(conflicts))
		blocked = blocked.and(v1alpha1.ReasonOwnershipConflict, !engine.GoingAway(conflicts), engine.ConflictsError(conflicts))
		retry = soonest(retry, backoff(time.Since(r.conflictSince(nn))))
	} else {
		r.memory.update(nn, func(m *remembered) { m.conflictSince = time.Time{} })
	}
	if len(rejected) > 0 {
		log.Info("The API server rejected objects as invalid; applied the others, nothing pruned", "rejected", len(rejected))
		blocked = blocked.and(v1alpha1.ReasonRejected, true, errors.Join(r.withholdSecretData(res.desired, rejected)...))
		retry = soonest(retry, rejectedRetry)
	}
	return soonest(retry, nextLook(res, out.Waiting())), blocked
}

// rejectedRetry: a resource with an object the API server rejected looks
// again this late (a change of its spec or of the templates comes sooner;
// an admission policy that rejected it may have changed).
const rejectedRetry = 10 * time.Minute

// soonest is the shorter of two waits, where 0 is none.
func soonest(a, b time.Duration) time.Duration {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}

// backoff is how long a resource that has been in conflict for lasted
// waits before it looks again: as long again, within [conflictRetry,
// maxConflictRetry], plus up to a fifth more at random. Events (the
// resource changed, a cached holder deleted) bring it back sooner; they do
// not make it wait longer.
func backoff(lasted time.Duration) time.Duration {
	return wait.Jitter(min(max(lasted, conflictRetry), maxConflictRetry), 0.2)
}

// conflictSince is when nn's ownership conflict began: now, when it had
// none.
func (r *Reconciler) conflictSince(nn types.NamespacedName) time.Time {
	var since time.Time
	r.memory.update(nn, func(m *remembered) {
		if m.conflictSince.IsZero() {
			m.conflictSince = time.Now()
		}
		since = m.conflictSince
	})
	return since
}
