package shard

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// Leases says where the shards' leader Leases are and how long a
// Lease must stay unchanged before its shard's claims are taken over.
type Leases struct {
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

// LeaseFor is the Lease of the shard whose claim value is holder.
func (l Leases) LeaseFor(holder string) client.ObjectKey {
	name := holder
	if holder == ClaimName(&Shards{}) {
		name = ""
	}
	return client.ObjectKey{Namespace: l.Namespace, Name: Shards{Name: name}.LeaseName(l.Base)}
}

// leaseCheckEvery: a shard's Lease is read at most this often, however many
// of its resources wait.
const leaseCheckEvery = time.Second

// LeaseWatch tells how long each shard's Lease has stayed unchanged.
type LeaseWatch struct {
	Leases Leases
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

// NewLeaseWatch is a LeaseWatch of leases that reads them with reader and
// seizes them with writer.
func NewLeaseWatch(leases Leases, reader client.Reader, writer client.Client) *LeaseWatch {
	return &LeaseWatch{Leases: leases, reader: reader, writer: writer, now: time.Now, seen: map[string]leaseSeen{}}
}

// look reads holder's Lease, at most every leaseCheckEvery, and notes when
// its version changed.
func (w *LeaseWatch) look(ctx context.Context, holder string) (leaseSeen, error) {
	s, now := w.seen[holder], w.now()
	if !s.checked.IsZero() && now.Sub(s.checked) < leaseCheckEvery {
		return s, nil
	}
	lease := &coordinationv1.Lease{}
	key := w.Leases.LeaseFor(holder)
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

// Gone reports whether holder's shard has had no leader for the wait, and
// makes sure none comes back: the first time, it seizes the Lease. When it
// is not gone, why says why, for the log.
func (w *LeaseWatch) Gone(ctx context.Context, holder, mine string) (ok bool, why string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s, err := w.look(ctx, holder)
	if err != nil {
		return false, "", err
	}
	switch idle := w.now().Sub(s.since); {
	case s.lease == nil:
		return false, fmt.Sprintf("shard %s has no leader Lease %s, so nothing tells whether it runs", holder, w.Leases.LeaseFor(holder)), nil
	case s.seized != "" && s.version() == s.seized:
		return true, "", nil
	case idle < w.Leases.Wait:
		return false, fmt.Sprintf("shard %s's leader Lease %s has not changed for %s; its claims are taken over after %s", holder, w.Leases.LeaseFor(holder), idle.Round(time.Second), w.Leases.Wait), nil
	}
	seized := s.lease.DeepCopy()
	seized.Spec.HolderIdentity = new(TakeoverHolder(mine))
	// A duration of its own, whatever the Lease had (a released Lease has
	// 1 s): an elector that finds it expired would acquire it at once.
	now := metav1.MicroTime{Time: w.now()}
	seized.Spec.RenewTime, seized.Spec.AcquireTime = &now, &now
	seized.Spec.LeaseDurationSeconds = new(int32(max(w.Leases.Wait.Seconds(), 1)))
	switch err := w.writer.Update(ctx, seized); {
	case apierrors.IsConflict(err):
		s.checked = time.Time{} // changed: read again, its leader runs
		w.seen[holder] = s
		return false, fmt.Sprintf("shard %s's leader Lease changed as it was seized", holder), nil
	case err != nil:
		return false, "", fmt.Errorf("seizing shard %s's leader Lease %s: %w", holder, w.Leases.LeaseFor(holder), err)
	}
	s.lease, s.seized, s.since = seized, seized.ResourceVersion, w.now()
	w.seen[holder] = s
	return true, "", nil
}

// TakeoverHolder is the holder a shard writes into a Lease it seizes.
func TakeoverHolder(mine string) string { return "taken-over-by-shard-" + mine }
