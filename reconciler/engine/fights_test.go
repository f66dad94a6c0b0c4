package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

func TestFights(t *testing.T) {
	f := NewFights()
	key := ObjectKey{id: ObjectID{Group: "apps", Kind: "Deployment", Namespace: "ns", Name: "web"}}
	drift := v1alpha1.ObjectDrift{Kind: "Deployment", Namespace: "ns", Name: "web", Reverted: true,
		Fields: []v1alpha1.FieldDrift{{Path: ".spec.replicas", Manager: "autoscaler"}}}
	now := time.Now()
	for i := 1; i < fightThreshold; i++ {
		if _, started := f.Corrected(key, drift, now); started {
			t.Fatalf("correction %d started a fight; want the %dth", i, fightThreshold)
		}
		if _, fighting := f.Fighting(key, now); fighting {
			t.Fatalf("fighting after %d corrections", i)
		}
	}
	state, started := f.Corrected(key, drift, now)
	if !started || state.Until.Sub(now) != fightBase || state.Drift.Reverted {
		t.Fatalf("correction %d: started %v, wait %v, reverted %v; want a fight, %v, not reverted", fightThreshold, started, state.Until.Sub(now), state.Drift.Reverted, fightBase)
	}
	if _, fighting := f.Fighting(key, now.Add(time.Second)); !fighting {
		t.Fatal("not fighting right after it started")
	}
	state, started = f.Corrected(key, v1alpha1.ObjectDrift{Kind: "Deployment", Name: "other"}, now.Add(time.Second))
	if started || state.Until.Sub(now.Add(time.Second)) != 2*fightBase || state.Drift.Name != "web" {
		t.Errorf("next correction: started %v, wait %v, drift of %q; want the wait doubled and the first drift kept", started, state.Until.Sub(now.Add(time.Second)), state.Drift.Name)
	}
	if msg := state.Describe(); !strings.Contains(msg, "autoscaler") || !strings.Contains(msg, ".spec.replicas") {
		t.Errorf("describe() = %q; want the manager and the field", msg)
	}
	if state, fighting := f.calm(key, now.Add(30*time.Second)); !fighting || !state.Until.Equal(state.end) {
		t.Errorf("calm within the fight window: fighting %v, looks again at %v; want the fight shown until it would end (%v)", fighting, state.Until, state.end)
	}
	// The wait after the second correction ends at now+3s; a minute later
	// the fight is over.
	later := now.Add(3*time.Second + fightWindow + time.Second)
	if _, fighting := f.calm(key, later); fighting {
		t.Error("still fighting after a correction held for the fight window")
	}
	if _, started := f.Corrected(key, drift, later); started {
		t.Error("a fight started anew by one correction after a calm")
	}
}

// Waits longer than the fight window do not end the fight: it ends a
// window after the wait, and the waits keep doubling up to fightMax.
func TestLongFightsKeepBackingOff(t *testing.T) {
	f := NewFights()
	key := ObjectKey{id: ObjectID{Name: "web"}}
	at := time.Now()
	for i := 1; i <= 12; i++ {
		state, _ := f.Corrected(key, v1alpha1.ObjectDrift{Name: "web"}, at)
		if i < fightThreshold {
			continue
		}
		if _, fighting := f.Fighting(key, state.Until.Add(-time.Second)); !fighting {
			t.Fatalf("correction %d: not fighting a second before the next correction, due %v later", i, state.Until.Sub(at))
		}
		if i == 12 && state.Until.Sub(at) != fightMax {
			t.Errorf("after 12 corrections the wait is %v, want %v", state.Until.Sub(at), fightMax)
		}
		at = state.Until // the other writer took the field back at once
	}
}
