package reconciler

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ownWrites tells the watch events of our own writes from those of other
// writers, so that our writes do not trigger reconciles that find nothing
// to do. An event can arrive before the write's response tells us its
// resourceVersion; while a write is in flight, events for its object are
// noted, and judged when the response arrives: any version other than ours
// is someone else's write, and the caller reconciles again.
type ownWrites[K comparable] struct {
	mu       sync.Mutex
	inFlight map[K][]uint64
}

// begin marks a write to key as in flight.
func (w *ownWrites[K]) begin(key K) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.inFlight == nil {
		w.inFlight = map[K][]uint64{}
	}
	w.inFlight[key] = []uint64{}
}

// end closes the write to key, whose result is written (nil when the write
// failed). It reports whether events of other versions came meanwhile
// (others), and whether the event of our own write did (seen: the cache
// holds it already).
func (w *ownWrites[K]) end(key K, written metav1.Object) (others, seen bool) {
	w.mu.Lock()
	noted := w.inFlight[key]
	delete(w.inFlight, key)
	w.mu.Unlock()
	var ours uint64
	if written != nil {
		ours = resourceVersion(written)
	}
	for _, rv := range noted {
		if rv == ours {
			seen = true
		} else {
			others = true
		}
	}
	return others, seen
}

// note handles a watch event of version rv of key: during a write it is
// noted and dropped (end judges it); otherwise ours decides whether it is our
// own write, to be dropped.
func (w *ownWrites[K]) note(key K, rv uint64, ours func() bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if noted, ok := w.inFlight[key]; ok {
		w.inFlight[key] = append(noted, rv)
		return true
	}
	return ours()
}
