package engine

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// OwnWrites tells the watch events of our own writes from those of other
// writers, so that our writes do not trigger reconciles that find nothing
// to do. An event can arrive before the write's response tells us its
// resourceVersion; while a write is in flight, events for its object are
// noted, and judged when the response arrives: any version other than ours
// is someone else's write, and the caller reconciles again.
//
// Writes ended with endAwaited are also kept until the watch shows them
// (see UnseenSince): a watch that lists again after it expired never tells
// of an object created and deleted meanwhile.
type OwnWrites[K comparable] struct {
	mu       sync.Mutex
	inFlight map[K][]uint64
	unseen   map[K]unseenWrite
}

// unseenWrite is a write whose version no watch event has shown yet.
type unseenWrite struct {
	version uint64
	at      time.Time
	// owner is whom to wake if it stays unseen.
	owner string
}

// Begin marks a write to key as in flight.
func (w *OwnWrites[K]) Begin(key K) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.inFlight == nil {
		w.inFlight = map[K][]uint64{}
	}
	w.inFlight[key] = []uint64{}
}

// End closes the write to key, whose result is written (nil when the write
// failed). It reports whether events of other versions came meanwhile
// (others), and whether the event of our own write did (seen: the cache
// holds it already).
func (w *OwnWrites[K]) End(key K, written metav1.Object) (others, seen bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	others, seen, _ = w.close(key, written)
	return others, seen
}

// endAwaited is end for a write whose event the watch must deliver: unless
// the cache held its version already (cached: the version the cache held
// before the write, 0 for none; a write that changed nothing keeps it), or
// an event of its version or a later one came while it was in flight, it
// is kept as unseen, with the owner to wake, until one comes. A failed
// write leaves an earlier unseen write of key as it was.
func (w *OwnWrites[K]) endAwaited(key K, written metav1.Object, cached uint64, owner string) (others bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	others, _, caughtUp := w.close(key, written)
	if written == nil {
		return others
	}
	delete(w.unseen, key)
	if ours := ResourceVersion(written); !caughtUp && (cached == 0 || ours > cached) {
		if w.unseen == nil {
			w.unseen = map[K]unseenWrite{}
		}
		w.unseen[key] = unseenWrite{version: ours, at: time.Now(), owner: owner}
	}
	return others
}

// close ends the write to key (w.mu held). caughtUp: an event of our
// version or a later one came while it was in flight.
func (w *OwnWrites[K]) close(key K, written metav1.Object) (others, seen, caughtUp bool) {
	noted := w.inFlight[key]
	delete(w.inFlight, key)
	var ours uint64
	if written != nil {
		ours = ResourceVersion(written)
	}
	for _, rv := range noted {
		if rv == ours {
			seen = true
		} else {
			others = true
		}
		caughtUp = caughtUp || rv >= ours
	}
	return others, seen, caughtUp
}

// Note handles a watch event of version rv of key: during a write it is
// noted and dropped (end judges it); otherwise ours decides whether it is our
// own write, to be dropped. Either way an unseen write of key that is not
// newer than rv is seen now.
func (w *OwnWrites[K]) Note(key K, rv uint64, ours func() bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if u, ok := w.unseen[key]; ok && rv >= u.version {
		delete(w.unseen, key)
	}
	if noted, ok := w.inFlight[key]; ok {
		w.inFlight[key] = append(noted, rv)
		return true
	}
	return ours()
}

// forget drops what is kept of key's writes: the object is gone (its
// deletion was seen, whichever version it names: the deletion's event
// wakes the owner anyway, or it was pruned).
func (w *OwnWrites[K]) forget(key K) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.unseen, key)
}

// UnseenSince takes the writes that no event has shown since before
// cutoff, and returns their owners (each once).
func (w *OwnWrites[K]) UnseenSince(cutoff time.Time) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var owners []string
	seen := map[string]bool{}
	for key, u := range w.unseen {
		if !u.at.Before(cutoff) {
			continue
		}
		delete(w.unseen, key)
		if !seen[u.owner] {
			seen[u.owner] = true
			owners = append(owners, u.owner)
		}
	}
	return owners
}
