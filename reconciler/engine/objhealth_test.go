package engine

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// TestPendingHealth: while the cache holds an older version of an object
// than our last apply produced, health is judged by what that apply
// returned, for cacheGrace at most; never for another render.
func TestPendingHealth(t *testing.T) {
	t.Run("of another version", func(t *testing.T) {
		d := &unstructured.Unstructured{}
		d.SetAnnotations(map[string]string{v1alpha1.AnnotationDesiredHash: "h1"})
		a := &Applier{fights: NewFights()}
		a.baselines.Store(KeyOf(d), baseline{hash: "h1", resourceVersion: 10, appliedAt: time.Now()})
		a.RememberHealth(d, 9, ObjectHealth{Message: "an older version"})
		if got := a.PendingHealth(d, 0); got != nil {
			t.Errorf("pendingHealth = %+v for another version than the baseline's", got)
		}
		a.ForgetDeleted(d.GroupVersionKind(), d)
		a.RememberHealth(d, 10, ObjectHealth{Message: "after the deletion"})
		if got := a.PendingHealth(d, 0); got != nil {
			t.Errorf("pendingHealth = %+v after the object was deleted", got)
		}
	})
	d := &unstructured.Unstructured{}
	d.SetAPIVersion("apps/v1")
	d.SetKind("Deployment")
	d.SetNamespace("ns")
	d.SetName("web")
	d.SetAnnotations(map[string]string{v1alpha1.AnnotationDesiredHash: "h1"})
	applied := &ObjectHealth{Object: "Deployment web", Message: "Deployment generation is 2, but latest observed generation is 1"}
	tests := []struct {
		name      string
		appliedAt time.Time
		hash      string
		cached    uint64
		want      bool
	}{
		{"the cache lags behind", time.Now(), "h1", 9, true},
		{"not in the cache yet", time.Now(), "h1", 0, true},
		{"the cache caught up", time.Now(), "h1", 10, false},
		{"another render", time.Now(), "h0", 9, false},
		{"too long ago", time.Now().Add(-cacheGrace), "h1", 9, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &Applier{}
			a.baselines.Store(KeyOf(d), baseline{hash: tt.hash, owned: []string{"{}"}, resourceVersion: 10, appliedAt: tt.appliedAt})
			a.RememberHealth(d, 10, *applied)
			got := a.PendingHealth(d, tt.cached)
			if (got != nil) != tt.want || got != nil && got.Message != applied.Message {
				t.Errorf("pendingHealth = %+v, want it %v", got, tt.want)
			}
		})
	}
}
