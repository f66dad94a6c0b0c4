package reconciler

import (
	"strings"
	"testing"
	"time"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

func TestFights(t *testing.T) {
	f := newFights()
	key := objectKey{gvk: "apps/v1, Kind=Deployment", namespace: "ns", name: "web"}
	drift := v1alpha1.ObjectDrift{Kind: "Deployment", Namespace: "ns", Name: "web", Reverted: true,
		Fields: []v1alpha1.FieldDrift{{Path: ".spec.replicas", Manager: "autoscaler"}}}
	now := time.Now()
	for i := 1; i < fightThreshold; i++ {
		if _, started := f.corrected(key, drift, now); started {
			t.Fatalf("correction %d started a fight; want the %dth", i, fightThreshold)
		}
		if _, fighting := f.fighting(key, now); fighting {
			t.Fatalf("fighting after %d corrections", i)
		}
	}
	state, started := f.corrected(key, drift, now)
	if !started || state.until.Sub(now) != fightBase || state.drift.Reverted {
		t.Fatalf("correction %d: started %v, wait %v, reverted %v; want a fight, %v, not reverted", fightThreshold, started, state.until.Sub(now), state.drift.Reverted, fightBase)
	}
	if _, fighting := f.fighting(key, now.Add(time.Second)); !fighting {
		t.Fatal("not fighting right after it started")
	}
	state, started = f.corrected(key, v1alpha1.ObjectDrift{Kind: "Deployment", Name: "other"}, now.Add(time.Second))
	if started || state.until.Sub(now.Add(time.Second)) != 2*fightBase || state.drift.Name != "web" {
		t.Errorf("next correction: started %v, wait %v, drift of %q; want the wait doubled and the first drift kept", started, state.until.Sub(now.Add(time.Second)), state.drift.Name)
	}
	if msg := state.describe(); !strings.Contains(msg, "autoscaler") || !strings.Contains(msg, ".spec.replicas") {
		t.Errorf("describe() = %q; want the manager and the field", msg)
	}
	if state, fighting := f.calm(key, now.Add(30*time.Second)); !fighting || !state.until.Equal(state.end) {
		t.Errorf("calm within the fight window: fighting %v, looks again at %v; want the fight shown until it would end (%v)", fighting, state.until, state.end)
	}
	// The wait after the second correction ends at now+3s; a minute later
	// the fight is over.
	later := now.Add(3*time.Second + fightWindow + time.Second)
	if _, fighting := f.calm(key, later); fighting {
		t.Error("still fighting after a correction held for the fight window")
	}
	if _, started := f.corrected(key, drift, later); started {
		t.Error("a fight started anew by one correction after a calm")
	}
}

// Waits longer than the fight window do not end the fight: it ends a
// window after the wait, and the waits keep doubling up to fightMax.
func TestLongFightsKeepBackingOff(t *testing.T) {
	f := newFights()
	key := objectKey{name: "web"}
	at := time.Now()
	for i := 1; i <= 12; i++ {
		state, _ := f.corrected(key, v1alpha1.ObjectDrift{Name: "web"}, at)
		if i < fightThreshold {
			continue
		}
		if _, fighting := f.fighting(key, state.until.Add(-time.Second)); !fighting {
			t.Fatalf("correction %d: not fighting a second before the next correction, due %v later", i, state.until.Sub(at))
		}
		if i == 12 && state.until.Sub(at) != fightMax {
			t.Errorf("after 12 corrections the wait is %v, want %v", state.until.Sub(at), fightMax)
		}
		at = state.until // the other writer took the field back at once
	}
}
