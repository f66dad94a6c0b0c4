package reconciler

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// memory is what this process remembers of each resource of the kind
// between its reconciles, in one place: forgetting a resource is one
// delete. Reconciles of one resource never run at once (controller-runtime
// queues a key once), but the watch's event handlers read the memory
// meanwhile: every access holds the lock, and readers get a copy. The zero
// memory is empty and ready to use.
type memory struct {
	mu sync.Mutex
	of map[types.NamespacedName]*remembered
}

// remembered is what this process remembers of one resource.
type remembered struct {
	// uids are the UIDs this process reconciled it with (owners maps
	// them back to it).
	uids []types.UID
	// written is the status this process last wrote (nil: none yet; see
	// writeStatus and notOwnStatusWrite).
	written *writtenStatus
	// conflictSince is when its ownership conflict began (zero: it has
	// none): the retry backs off with its age.
	conflictSince time.Time
	// held are its objects as the previous templates made them, while it
	// waits for its turn in a paced rollout (nil: it does not wait; see
	// hold.go).
	held heldObjects
	// claimedWith: this shard claimed it and has not pruned since; the
	// next prune lists its objects from the API server (nil: not just
	// claimed; true: it had an inventory when claimed).
	claimedWith *bool
}

// get is a copy of what is remembered of nn (the zero value: nothing).
func (m *memory) get(nn types.NamespacedName) remembered {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.of[nn]; e != nil {
		return *e
	}
	return remembered{}
}

// update changes what is remembered of nn.
func (m *memory) update(nn types.NamespacedName, change func(*remembered)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.of[nn]
	if e == nil {
		if m.of == nil {
			m.of = map[types.NamespacedName]*remembered{}
		}
		e = &remembered{}
		m.of[nn] = e
	}
	change(e)
}

// updateKnown changes what is remembered of nn, when anything is: a
// resource forgotten meanwhile stays forgotten.
func (m *memory) updateKnown(nn types.NamespacedName, change func(*remembered)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.of[nn]; e != nil {
		change(e)
	}
}

// forget drops what is remembered of nn, returning it.
func (m *memory) forget(nn types.NamespacedName) remembered {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.of[nn]
	delete(m.of, nn)
	if e == nil {
		return remembered{}
	}
	return *e
}

// forgetHeld drops the objects held for nn: its turn came, or it is
// another shard's now.
func (m *memory) forgetHeld(nn types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.of[nn]; e != nil {
		e.held = nil
	}
}

// noteUID remembers that nn was reconciled with uid.
func (m *memory) noteUID(nn types.NamespacedName, uid types.UID) {
	m.update(nn, func(e *remembered) {
		if !slices.Contains(e.uids, uid) {
			e.uids = append(e.uids, uid)
		}
	})
}
