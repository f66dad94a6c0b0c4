package reconciler

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
// saw it, and the claims of its shard may be taken over. A shard with no
// Lease at all (run without leader election) cannot be told from a
// running one: its claims are never taken over.

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
	now    func() time.Time

	mu   sync.Mutex
	seen map[string]leaseSeen // claim value → what was seen of its Lease
}

// leaseSeen is what this process saw of one shard's Lease.
type leaseSeen struct {
	version string    // its resourceVersion; "" when there is none
	since   time.Time // when this process first saw that version
	checked time.Time // when it last read it
}

func newLeaseWatch(leases ShardLeases, reader client.Reader) *leaseWatch {
	return &leaseWatch{leases: leases, reader: reader, now: time.Now, seen: map[string]leaseSeen{}}
}

// unchanged says how long holder's Lease has stayed as it is, as this
// process saw it, and whether holder has a Lease at all.
func (w *leaseWatch) unchanged(ctx context.Context, holder string) (time.Duration, bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s, now := w.seen[holder], w.now()
	if s.checked.IsZero() || now.Sub(s.checked) >= leaseCheckEvery {
		lease := &coordinationv1.Lease{}
		key := w.leases.leaseFor(holder)
		version := ""
		switch err := w.reader.Get(ctx, key, lease); {
		case err == nil:
			version = lease.ResourceVersion
		case !apierrors.IsNotFound(err):
			return 0, false, fmt.Errorf("reading shard %s's leader Lease %s: %w", holder, key, err)
		}
		if s.since.IsZero() || version != s.version {
			s.version, s.since = version, now
		}
		s.checked = now
		w.seen[holder] = s
	}
	return now.Sub(s.since), s.version != "", nil
}

// holderGone reports whether the shard holder, which holds a claim this
// shard waits for, has had no leader for the leases' Wait, and logs why
// not when it has not.
func (r *Reconciler) holderGone(ctx context.Context, holder string) (bool, time.Duration, error) {
	if r.leases == nil {
		return false, 0, nil
	}
	idle, exists, err := r.leases.unchanged(ctx, holder)
	if err != nil || !exists {
		return false, 0, err
	}
	return idle >= r.leases.leases.Wait, idle, nil
}
