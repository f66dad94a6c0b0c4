package reconciler

import (
	"testing"

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
			var w ownWrites[string]
			w.begin("k")
			for _, rv := range tt.during {
				if !w.note("k", rv, func() bool { t.Fatal("asked while in flight"); return false }) {
					t.Errorf("event %d during the write was not held back", rv)
				}
			}
			others, seen := w.end("k", tt.written)
			if others != tt.othersWrote || seen != tt.seenOwn {
				t.Errorf("end = (others %v, seen %v), want (%v, %v)", others, seen, tt.othersWrote, tt.seenOwn)
			}
			decided := false
			w.note("k", 8, func() bool { decided = true; return false })
			if !decided {
				t.Error("after the write, events are not judged by the caller")
			}
		})
	}
}
