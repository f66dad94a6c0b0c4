package engine

import (
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestOwnWrites(t *testing.T) {
	version := func(rv string) metav1.Object { return &metav1.ObjectMeta{ResourceVersion: rv} }
	tests := []struct {
		name        string
		during      []uint64      // versions the watch delivers while the write is in flight
		written     metav1.Object // the write's result; nil: it failed
		othersWrote bool
		seenOwn     bool
	}{
		{"no event before the response", nil, version("7"), false, false},
		{"our own event before the response", []uint64{7}, version("7"), false, true},
		{"someone else's write after ours", []uint64{7, 9}, version("7"), true, true},
		{"someone else's write before ours", []uint64{5}, version("7"), true, false},
		{"an event during a failed write", []uint64{5}, nil, true, false},
		{"a failed write, no event", nil, nil, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w OwnWrites[string]
			w.Begin("k")
			for _, rv := range tt.during {
				if !w.Note("k", rv, func() bool { t.Fatal("asked while in flight"); return false }) {
					t.Errorf("event %d during the write was not held back", rv)
				}
			}
			others, seen := w.End("k", tt.written)
			if others != tt.othersWrote || seen != tt.seenOwn {
				t.Errorf("end = (others %v, seen %v), want (%v, %v)", others, seen, tt.othersWrote, tt.seenOwn)
			}
			decided := false
			w.Note("k", 8, func() bool { decided = true; return false })
			if !decided {
				t.Error("after the write, events are not judged by the caller")
			}
		})
	}
}

func TestUnseenWrites(t *testing.T) {
	version := func(rv string) metav1.Object { return &metav1.ObjectMeta{ResourceVersion: rv} }
	tests := []struct {
		name    string
		earlier metav1.Object // an earlier write of the object, never seen
		cached  uint64        // the version the cache held before the write
		during  []uint64      // versions the watch delivers while the write is in flight
		written metav1.Object // the write's result; nil: it failed
		after   []uint64      // versions the watch delivers after the write
		forget  bool          // the object's deletion was seen
		unseen  bool          // the owner is woken
	}{
		{"no event at all", nil, 0, nil, version("7"), nil, false, true},
		{"our own event before the response", nil, 0, []uint64{7}, version("7"), nil, false, false},
		{"a later write's event before the response", nil, 0, []uint64{9}, version("7"), nil, false, false},
		{"only an older write's event before the response", nil, 0, []uint64{5}, version("7"), nil, false, true},
		{"our own event after the response", nil, 0, nil, version("7"), []uint64{7}, false, false},
		{"a later event after the response", nil, 0, nil, version("7"), []uint64{8}, false, false},
		{"only an older event after the response", nil, 0, nil, version("7"), []uint64{6}, false, true},
		{"the object's deletion seen", nil, 0, nil, version("7"), nil, true, false},
		{"a failed write", nil, 0, nil, nil, nil, false, false},
		{"a failed write after an unseen one", version("4"), 0, nil, nil, nil, false, true},
		{"a write after an unseen one, seen", version("4"), 0, []uint64{7}, version("7"), nil, false, false},
		{"a write that changed nothing the cache holds", nil, 7, nil, version("7"), nil, false, false},
		{"a change of an object the cache holds", nil, 6, nil, version("7"), nil, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w OwnWrites[string]
			if tt.earlier != nil {
				w.Begin("k")
				w.endAwaited("k", tt.earlier, 0, "owner")
			}
			w.Begin("k")
			for _, rv := range tt.during {
				if !w.Note("k", rv, func() bool { t.Fatal("asked while in flight"); return false }) {
					t.Errorf("event %d during the write was not held back", rv)
				}
			}
			w.endAwaited("k", tt.written, tt.cached, "owner")
			for _, rv := range tt.after {
				w.Note("k", rv, func() bool { return false })
			}
			if tt.forget {
				w.forget("k")
			}
			if got := w.UnseenSince(time.Now().Add(-time.Minute)); len(got) != 0 {
				t.Errorf("a write of a moment ago is taken as missed: %v", got)
			}
			got := w.UnseenSince(time.Now().Add(time.Second))
			if want := tt.unseen; (len(got) == 1 && got[0] == "owner") != want {
				t.Errorf("owners to wake = %v, want the owner: %v", got, want)
			}
			if again := w.UnseenSince(time.Now().Add(time.Second)); len(again) != 0 {
				t.Errorf("woken twice: %v", again)
			}
		})
	}
}

func TestUnseenWritesWakeEachOwnerOnce(t *testing.T) {
	var w OwnWrites[string]
	for i, key := range []string{"a", "b", "c"} {
		w.Begin(key)
		w.endAwaited(key, &metav1.ObjectMeta{ResourceVersion: fmt.Sprint(i + 1)}, 0, map[string]string{"a": "x", "b": "x", "c": "y"}[key])
	}
	got := w.UnseenSince(time.Now().Add(time.Second))
	slices.Sort(got)
	if !slices.Equal(got, []string{"x", "y"}) {
		t.Errorf("owners to wake = %v, want x and y once each", got)
	}
}

// cachedVersion is the cache's version only for verdicts built from the
// cache: an object read from the API server is not in the cache, and a
// write that changes nothing there must still be awaited.
func TestVerdictCachedVersion(t *testing.T) {
	cached := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "7"}}
	tests := []struct {
		name string
		v    verdict
		want uint64
	}{
		{"a new render of a cached object", verdict{decision: apply, live: cached}, 7},
		{"drift on a cached object", verdict{decision: compare, live: cached}, 7},
		{"adopting a cached object", verdict{decision: adopt, live: cached, resourceVersion: "7"}, 7},
		{"ours, read from the API server", verdict{decision: apply, live: cached, resourceVersion: "7"}, 0},
		{"adopting, read from the API server", verdict{decision: adopt, resourceVersion: "7"}, 0},
		{"creating", verdict{decision: create}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.v.cachedVersion(); got != tt.want {
				t.Errorf("cachedVersion = %d, want %d", got, tt.want)
			}
		})
	}
}
