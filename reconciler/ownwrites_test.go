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
	}{
		{"no event before the response", nil, version("7"), false},
		{"our own event before the response", []uint64{7}, version("7"), false},
		{"someone else's write after ours", []uint64{7, 9}, version("7"), true},
		{"someone else's write before ours", []uint64{5}, version("7"), true},
		{"an event during a failed write", []uint64{5}, nil, true},
		{"a failed write, no event", nil, nil, false},
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
			if got := w.end("k", tt.written); got != tt.othersWrote {
				t.Errorf("othersWrote = %v, want %v", got, tt.othersWrote)
			}
			decided := false
			w.note("k", 8, func() bool { decided = true; return false })
			if !decided {
				t.Error("after the write, events are not judged by the caller")
			}
		})
	}
}
