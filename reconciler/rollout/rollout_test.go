package rollout

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
)

func widgetWithStatus(name string, generation int64, s v1alpha1.Status) *testv1alpha1.Widget {
	w := &testv1alpha1.Widget{}
	w.Name, w.Namespace, w.Generation = name, "ns", generation
	w.Status.Status = s
	return w
}

func readyCondition(status metav1.ConditionStatus, reason string, since time.Time) []metav1.Condition {
	return []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(since)}}
}

func TestTemplateChange(t *testing.T) {
	ready := readyCondition(metav1.ConditionTrue, v1alpha1.ReasonReconciled, time.Now())
	converged := v1alpha1.Status{ObservedGeneration: 2, Templates: "sha256:old", RenderDigest: "sha256:r1", Conditions: ready}
	with := func(change func(*v1alpha1.Status)) v1alpha1.Status {
		s := *converged.DeepCopy()
		change(&s)
		return s
	}
	cases := []struct {
		name       string
		generation int64
		status     v1alpha1.Status
		batch      int
		want       bool
	}{
		{"converged, new templates, new render", 2, converged, 2, true},
		{"pacing off", 2, converged, 0, false},
		{"spec changed too", 3, converged, 2, false},
		{"same render", 2, with(func(s *v1alpha1.Status) { s.RenderDigest = "sha256:r2" }), 2, false},
		{"same templates", 2, with(func(s *v1alpha1.Status) { s.Templates = "sha256:new" }), 2, false},
		{"never applied with a known version", 2, with(func(s *v1alpha1.Status) { s.Templates = "" }), 2, false},
		{"not Ready", 2, with(func(s *v1alpha1.Status) {
			s.Conditions = readyCondition(metav1.ConditionFalse, v1alpha1.ReasonApplyFailed, time.Now())
		}), 2, false},
		{"not Ready, on its way", 2, with(func(s *v1alpha1.Status) {
			s.Conditions = readyCondition(metav1.ConditionFalse, v1alpha1.ReasonProgressing, time.Now())
		}), 2, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := New("Widget", "sha256:new", Options{Batch: c.batch, Deadline: time.Minute})
			if got := g.TemplateChange(widgetWithStatus("w", c.generation, c.status), "sha256:r2"); got != c.want {
				t.Errorf("templateChange = %v, want %v", got, c.want)
			}
		})
	}
}

// gate is a rollout whose wake-ups the test reads.
func gate(t *testing.T, opts Options, existing ...v1alpha1.Object) *Gate {
	t.Helper()
	g := New("Widget", "sha256:new", opts)
	g.NewObject = func() client.Object { return &testv1alpha1.Widget{} }
	g.List = func(context.Context) ([]v1alpha1.Object, error) { return existing, nil }
	return g
}

// woken collects the resources the gate wakes: it waits (ten seconds at
// most) until each of want has come, and then a short while for any other.
// The gate wakes from goroutines of its own (and its deadline from a
// timer), which a loaded machine may run late.
func woken(g *Gate, want ...string) []string {
	var names []string
	deadline := time.After(10 * time.Second)
	for !containsEach(names, want) {
		select {
		case e := <-g.Wake:
			names = append(names, e.Object.GetName())
		case <-deadline:
			slices.Sort(names)
			return slices.Compact(names)
		}
	}
	others := time.After(100 * time.Millisecond)
	for {
		select {
		case e := <-g.Wake:
			names = append(names, e.Object.GetName())
		case <-others:
			slices.Sort(names)
			return slices.Compact(names)
		}
	}
}

// containsEach: every one of want is among names.
func containsEach(names, want []string) bool {
	for _, w := range want {
		if !slices.Contains(names, w) {
			return false
		}
	}
	return true
}

func nn(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }

func mustAdmit(t *testing.T, g *Gate, name string) Turn {
	t.Helper()
	v, err := g.Admit(context.Background(), nn(name), 1, true)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Two at a time: the third waits, and goes when one of the first is Ready;
// a failed one halts the rollout (told once), and its recovery resumes it.
func TestRolloutBatches(t *testing.T) {
	g := gate(t, Options{Batch: 2, Deadline: time.Hour})
	for _, name := range []string{"a", "b"} {
		if v := mustAdmit(t, g, name); !v.Started {
			t.Fatalf("%s: %+v, want started", name, v)
		}
	}
	if v := mustAdmit(t, g, "a"); v.Wait || v.Started {
		t.Errorf("a again: %+v, want to go on without a new start", v)
	}
	for _, name := range []string{"c", "d"} {
		if v := mustAdmit(t, g, name); !v.Wait || v.Halted {
			t.Fatalf("%s: %+v, want to wait", name, v)
		}
	}
	if _, halted := g.Settle(nn("a"), 1, false, ""); halted {
		t.Error("a progressing halted the rollout")
	}
	if got := woken(g); len(got) != 0 {
		t.Errorf("woken while nothing is Ready: %v", got)
	}
	g.Settle(nn("a"), 1, true, "")
	if got := woken(g, "c"); !slices.Equal(got, []string{"c"}) {
		t.Errorf("woken after a is Ready: %v, want [c], the first waiting", got)
	}
	if v := mustAdmit(t, g, "c"); !v.Started {
		t.Fatalf("c after a turn was free: %+v", v)
	}
	why, halted := g.Settle(nn("b"), 1, false, "Deployment web: progress deadline exceeded")
	if !halted || why == "" {
		t.Fatalf("b failed: halt not reported (%q, %v)", why, halted)
	}
	if _, again := g.Settle(nn("b"), 1, false, "Deployment web: progress deadline exceeded"); again {
		t.Error("the halt was reported twice")
	}
	if got := woken(g, "d"); !slices.Equal(got, []string{"d"}) {
		t.Errorf("woken by the halt: %v, want the waiting [d]", got)
	}
	v := mustAdmit(t, g, "d")
	if !v.Wait || !v.Halted || v.culprit != nn("b") {
		t.Fatalf("d while b failed: %+v, want halted by b", v)
	}
	if msg := g.WaitMessage(v); !containsAll(msg, "halted", "ns/b", "progress deadline exceeded") {
		t.Errorf("message %q does not say what halted the rollout", msg)
	}
	g.Settle(nn("b"), 1, true, "")
	if got := woken(g, "d"); !slices.Equal(got, []string{"d"}) {
		t.Errorf("woken when the halt ended: %v, want [d]", got)
	}
	if v := mustAdmit(t, g, "d"); !v.Started {
		t.Errorf("d after the halt ended: %+v, want started", v)
	}
	if v, _ := g.Admit(context.Background(), nn("e"), 1, false); v.Wait {
		t.Error("a resource without a template change was held back")
	}
}

// A resource not Ready by the deadline halts the rollout; the timer wakes
// it (to report) and the waiting ones (to say so).
func TestRolloutDeadline(t *testing.T) {
	g := gate(t, Options{Batch: 1, Deadline: 50 * time.Millisecond})
	mustAdmit(t, g, "a")
	if v := mustAdmit(t, g, "b"); !v.Wait || v.Halted {
		t.Fatalf("b: %+v, want to wait", v)
	}
	if got := woken(g, "a", "b"); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("woken at the deadline: %v, want [a b]", got)
	}
	if v := mustAdmit(t, g, "b"); !v.Halted || v.culprit != nn("a") {
		t.Errorf("b after a's deadline: %+v, want halted by a", v)
	}
	if why, halted := g.Settle(nn("a"), 1, false, ""); !halted || why == "" {
		t.Errorf("a past its deadline: halt not reported")
	}
	g.Forget(nn("a"))
	if got := woken(g, "b"); !slices.Equal(got, []string{"b"}) {
		t.Errorf("woken when a was deleted: %v, want [b]", got)
	}
}

// A new process takes what the previous one left rolling from the
// resources' status.rollout: one reached by this version longer than the
// deadline ago halts the rollout; one reached by another version, or never,
// does not count, whatever its Ready.
func TestRolloutSeedsFromStatus(t *testing.T) {
	old := metav1.NewTime(time.Now().Add(-time.Hour))
	progressing := readyCondition(metav1.ConditionFalse, v1alpha1.ReasonProgressing, old.Time)
	left := widgetWithStatus("left", 1, v1alpha1.Status{ObservedGeneration: 1, Templates: "sha256:new", Conditions: progressing,
		Rollout: &v1alpha1.RolloutStatus{Templates: "sha256:new", Started: old}})
	earlier := widgetWithStatus("earlier", 1, v1alpha1.Status{ObservedGeneration: 1, Templates: "sha256:older", Conditions: progressing,
		Rollout: &v1alpha1.RolloutStatus{Templates: "sha256:older", Started: old}})
	broken := widgetWithStatus("broken", 1, v1alpha1.Status{ObservedGeneration: 1, Templates: "sha256:new", Conditions: progressing})
	g := gate(t, Options{Batch: 5, Deadline: time.Minute}, left, earlier, broken)
	if v := mustAdmit(t, g, "x"); !v.Halted || v.culprit != nn("left") {
		t.Errorf("x: %+v, want halted by the resource left rolling", v)
	}
	g = gate(t, Options{Batch: 1, Deadline: time.Minute}, earlier, broken)
	if v := mustAdmit(t, g, "x"); !v.Started {
		t.Errorf("x: %+v, want started: no resource was left rolling by this version", v)
	}
}

// When the resource that halts the rollout is Ready and another one still
// halts it, the waiting ones are woken to name the new culprit.
func TestRolloutNewCulprit(t *testing.T) {
	g := gate(t, Options{Batch: 2, Deadline: time.Hour})
	mustAdmit(t, g, "a")
	mustAdmit(t, g, "b")
	g.Settle(nn("a"), 1, false, "failed a")
	g.Settle(nn("b"), 1, false, "failed b")
	mustAdmit(t, g, "c")
	woken(g)
	g.Settle(nn("a"), 1, true, "")
	if got := woken(g, "c"); !slices.Equal(got, []string{"c"}) {
		t.Errorf("woken: %v, want [c]", got)
	}
	if v := mustAdmit(t, g, "c"); !v.Halted || v.culprit != nn("b") {
		t.Errorf("c: %+v, want halted by b", v)
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// Only what the new templates cause counts against a rollout: a resource
// it reached whose own spec changes leaves it. Its failure then halts no
// one (issue 32: one tenant's bad image or conflicting name held every
// other namespace's resources in RolloutHalted), and its turn goes to the
// next waiting resource. This holds when the spec change shows first at
// settle (its render failed, so admit never saw it) and at admit.
func TestRolloutSpecChangeLeaves(t *testing.T) {
	g := gate(t, Options{Batch: 2, Deadline: time.Hour})
	mustAdmit(t, g, "a")
	mustAdmit(t, g, "b")
	if v := mustAdmit(t, g, "c"); !v.Wait {
		t.Fatalf("c: %+v, want to wait", v)
	}
	conflict := DescribeFailure(v1alpha1.ReasonOwnershipConflict, `Service "web" is owned by another resource`)
	if why, halted := g.Settle(nn("a"), 2, false, conflict); halted {
		t.Fatalf("a, whose spec changed, halted the rollout: %s", why)
	}
	if got := woken(g, "c"); !slices.Equal(got, []string{"c"}) {
		t.Errorf("woken when a left the rollout: %v, want [c]", got)
	}
	if v := mustAdmit(t, g, "c"); !v.Started {
		t.Fatalf("c after a left: %+v, want started", v)
	}
	if v, _ := g.Admit(context.Background(), nn("b"), 2, false); v.Wait || !v.Since.IsZero() {
		t.Errorf("b with a new spec: %+v, want to pass, outside the rollout", v)
	}
	if _, halted := g.Settle(nn("b"), 2, false, conflict); halted {
		t.Error("b, whose spec changed, halted the rollout")
	}
	why, halted := g.Settle(nn("c"), 1, false, conflict)
	if !halted {
		t.Fatal("c, failing on the new templates, did not halt the rollout")
	}
	if strings.Contains(why, "kstatus") || !containsAll(why, v1alpha1.ReasonOwnershipConflict, `Service "web"`) {
		t.Errorf("halt %q does not say its true cause", why)
	}
}

// The seed takes from status.rollout only the resources whose spec did not
// change since (generation = observedGeneration); one seeded and changed
// afterwards leaves at its next reconcile.
func TestRolloutSeededSpecChangeLeaves(t *testing.T) {
	old := metav1.NewTime(time.Now().Add(-time.Hour))
	rolling := func(name string, generation int64) *testv1alpha1.Widget {
		return widgetWithStatus(name, generation, v1alpha1.Status{ObservedGeneration: 1, Templates: "sha256:new",
			Conditions: readyCondition(metav1.ConditionFalse, v1alpha1.ReasonProgressing, old.Time),
			Rollout:    &v1alpha1.RolloutStatus{Templates: "sha256:new", Started: old}})
	}
	g := gate(t, Options{Batch: 1, Deadline: time.Minute}, rolling("changed", 2))
	if v := mustAdmit(t, g, "x"); !v.Started {
		t.Errorf("x: %+v, want started: the one left rolling changed its spec since", v)
	}
	g = gate(t, Options{Batch: 1, Deadline: time.Minute}, rolling("left", 1))
	if v := mustAdmit(t, g, "x"); !v.Halted {
		t.Fatalf("x: %+v, want halted by the resource left rolling", v)
	}
	if _, halted := g.Settle(nn("left"), 2, false, ""); halted {
		t.Error("left, whose spec changed after the seed, halted the rollout")
	}
	if v := mustAdmit(t, g, "x"); !v.Started {
		t.Errorf("x: %+v, want started once left is out", v)
	}
}

func TestDescribeFailure(t *testing.T) {
	for _, tt := range []struct{ reason, want string }{
		{v1alpha1.ReasonHealthCheckFailed, "kstatus says it failed: m"},
		{v1alpha1.ReasonOwnershipConflict, "it is stalled (OwnershipConflict): m"},
		{v1alpha1.ReasonImmutableField, "it is stalled (ImmutableField): m"},
	} {
		if got := DescribeFailure(tt.reason, "m"); got != tt.want {
			t.Errorf("describeFailure(%s) = %q, want %q", tt.reason, got, tt.want)
		}
	}
}

// A reload (--reload-templates) is a new version: what the previous one
// had rolling no longer holds the new one back, the waiting resources are
// woken, and a resource applied with the previous version is a change.
func TestRolloutNewVersion(t *testing.T) {
	g := gate(t, Options{Batch: 1, Deadline: time.Hour})
	if v := mustAdmit(t, g, "a"); !v.Started {
		t.Fatalf("a: %+v, want started", v)
	}
	if v := mustAdmit(t, g, "b"); !v.Wait {
		t.Fatalf("b: %+v, want to wait", v)
	}
	g.NewVersion("sha256:newer")
	if got := woken(g, "b"); !slices.Equal(got, []string{"b"}) {
		t.Errorf("woken by the new version: %v, want [b]", got)
	}
	if v := mustAdmit(t, g, "b"); !v.Started {
		t.Errorf("b after the new version: %+v, want started (a no longer counts)", v)
	}
	ready := readyCondition(metav1.ConditionTrue, v1alpha1.ReasonReconciled, time.Now())
	applied := widgetWithStatus("c", 1, v1alpha1.Status{ObservedGeneration: 1, Templates: "sha256:new", RenderDigest: "sha256:r1", Conditions: ready})
	if !g.TemplateChange(applied, "sha256:r2") {
		t.Error("a resource applied with the previous version: not a change of the templates")
	}
	if !strings.Contains(g.WaitMessage(Turn{Wait: true}), "sha256:newer") {
		t.Errorf("wait message %q does not name the new version", g.WaitMessage(Turn{Wait: true}))
	}
}
