package reconciler

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// A claim is given up only by the shard that holds it. A shard that no
// longer runs (its Deployment deleted, its name dropped from --shards)
// would hold its claims for ever, and the shard its resources went to would
// wait for them. The shards' leader Leases tell whether a shard runs: its
// leader renews its Lease every few seconds, and its fence stops its writes
// less than a lease duration after its last renewal was sent. So a Lease
// that this process has seen unchanged (same resourceVersion) for longer
// than a lease duration has had no leader writing since before it first
// saw it.
//
// That alone is not enough: a leader that was only paused (a frozen VM,
// SIGSTOP) would, woken, renew its Lease (client-go renews a Lease it still
// holds, expired or not), open its fence again and go on writing. So before
// taking the first claim of a shard over, this shard seizes that shard's
// Lease: it writes itself in as the holder, with an optimistic lock on the
// version it saw unchanged. A woken leader then finds the Lease held by
// another, cannot renew, stays fenced and, its renew deadline past, exits.
// A Lease that changed meanwhile fails the seizure: that shard runs.
//
// Only claims made under a Lease (marked v1alpha1.AnnotationClaimLease by a
// process that elects its leader) are taken over: a shard run without
// leader election cannot be told from a stopped one.

// ShardLeases says where the shards' leader Leases are and how long a
// Lease must stay unchanged before its shard's claims are taken over.
type ShardLeases struct {
	// Namespace holds the Leases.
	Namespace string
	// Base is the default shard's Lease; shard s's is Base-s
	// (Shards.LeaseName).
	Base string
	// Wait is how long a shard's Lease must stay unchanged, as this
	// process sees it, before its claims are taken over: more than the
	// lease duration, by a margin.
	Wait time.Duration
}

// leaseFor is the Lease of the shard whose claim value is holder.
func (l ShardLeases) leaseFor(holder string) client.ObjectKey {
	name := holder
	if holder == claimName(&Shards{}) {
		name = ""
	}
	return client.ObjectKey{Namespace: l.Namespace, Name: Shards{Name: name}.LeaseName(l.Base)}
}

// leaseCheckEvery: a shard's Lease is read at most this often, however many
// of its resources wait.
const leaseCheckEvery = time.Second

// leaseWatch tells how long each shard's Lease has stayed unchanged.
type leaseWatch struct {
	leases ShardLeases
	reader client.Reader
	writer client.Client
	now    func() time.Time

	mu   sync.Mutex
	seen map[string]leaseSeen // claim value → what was seen of its Lease
}

// leaseSeen is what this process saw of one shard's Lease.
type leaseSeen struct {
	lease   *coordinationv1.Lease // as last read; nil when there is none
	since   time.Time             // when this process first saw that version
	checked time.Time             // when it last read it
	// seized is the version of this process's own write that made it the
	// Lease's holder: while the Lease stays at it, no leader of that shard
	// came back.
	seized string
}

func (s leaseSeen) version() string {
	if s.lease == nil {
		return ""
	}
	return s.lease.ResourceVersion
}

func newLeaseWatch(leases ShardLeases, reader client.Reader, writer client.Client) *leaseWatch {
	return &leaseWatch{leases: leases, reader: reader, writer: writer, now: time.Now, seen: map[string]leaseSeen{}}
}

// look reads holder's Lease, at most every leaseCheckEvery, and notes when
// its version changed.
func (w *leaseWatch) look(ctx context.Context, holder string) (leaseSeen, error) {
	s, now := w.seen[holder], w.now()
	if !s.checked.IsZero() && now.Sub(s.checked) < leaseCheckEvery {
		return s, nil
	}
	lease := &coordinationv1.Lease{}
	key := w.leases.leaseFor(holder)
	switch err := w.reader.Get(ctx, key, lease); {
	case apierrors.IsNotFound(err):
		lease = nil
	case err != nil:
		return s, fmt.Errorf("reading shard %s's leader Lease %s: %w", holder, key, err)
	}
	before := s.version()
	s.lease = lease
	if s.since.IsZero() || s.version() != before {
		s.since = now
	}
	s.checked = now
	w.seen[holder] = s
	return s, nil
}

// gone reports whether holder's shard has had no leader for the wait, and
// makes sure none comes back: the first time, it seizes the Lease. When it
// is not gone, why says why, for the log.
func (w *leaseWatch) gone(ctx context.Context, holder, mine string) (ok bool, why string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s, err := w.look(ctx, holder)
	if err != nil {
		return false, "", err
	}
	switch idle := w.now().Sub(s.since); {
	case s.lease == nil:
		return false, fmt.Sprintf("shard %s has no leader Lease %s, so nothing tells whether it runs", holder, w.leases.leaseFor(holder)), nil
	case s.seized != "" && s.version() == s.seized:
		return true, "", nil
	case idle < w.leases.Wait:
		return false, fmt.Sprintf("shard %s's leader Lease %s has not changed for %s; its claims are taken over after %s", holder, w.leases.leaseFor(holder), idle.Round(time.Second), w.leases.Wait), nil
	}
	seized := s.lease.DeepCopy()
	seized.Spec.HolderIdentity = new(takeoverHolder(mine))
	// A duration of its own, whatever the Lease had (a released Lease has
	// 1 s): an elector that finds it expired would acquire it at once.
	now := metav1.MicroTime{Time: w.now()}
	seized.Spec.RenewTime, seized.Spec.AcquireTime = &now, &now
	seized.Spec.LeaseDurationSeconds = new(int32(max(w.leases.Wait.Seconds(), 1)))
	switch err := w.writer.Update(ctx, seized); {
	case apierrors.IsConflict(err):
		s.checked = time.Time{} // changed: read again, its leader runs
		w.seen[holder] = s
		return false, fmt.Sprintf("shard %s's leader Lease changed as it was seized", holder), nil
	case err != nil:
		return false, "", fmt.Errorf("seizing shard %s's leader Lease %s: %w", holder, w.leases.leaseFor(holder), err)
	}
	s.lease, s.seized, s.since = seized, seized.ResourceVersion, w.now()
	w.seen[holder] = s
	return true, "", nil
}

// takeoverHolder is the holder a shard writes into a Lease it seizes.
func takeoverHolder(mine string) string { return "taken-over-by-shard-" + mine }

// holderGone reports whether the shard holder, whose claim on cr this shard
// waits for, has had no leader for the leases' Wait (and cannot come back).
// When it has not, why says so.
func (r *Reconciler) holderGone(ctx context.Context, cr client.Object, holder string) (bool, string, error) {
	if r.leases == nil {
		return false, "this process runs without leader election, so it takes no claim over", nil
	}
	switch under := cr.GetAnnotations()[v1alpha1.AnnotationClaimLease]; under {
	case "":
		return false, fmt.Sprintf("shard %s took the claim without leader election, so nothing tells whether it runs", holder), nil
	case r.leases.leases.leaseFor(holder).Name:
	default:
		return false, fmt.Sprintf("shard %s took the claim under the Lease %s, not %s, which this process would watch", holder, under, r.leases.leases.leaseFor(holder)), nil
	}
	return r.leases.gone(ctx, holder, claimName(r.shards))
}
