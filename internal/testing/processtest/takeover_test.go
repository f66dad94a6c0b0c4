package processtest_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
	"github.com/stencil-operator/stencil/internal/testing/testutil"
	"github.com/stencil-operator/stencil/internal/testing/testutil/testop"
	"github.com/stencil-operator/stencil/reconciler/shard"
	"github.com/stencil-operator/stencil/render"
)

// TestDeadShardsClaimsAreTakenOver: shard c stops for good (as a killed
// process: it gives nothing up) while two of its Widgets move to shard d,
// which starts afterwards (a new process: it remembers nothing).
//   - w-1 looks as if d had claimed it and failed over before its first
//     prune: claimed by d, with the prune-pending mark. d's prune must list
//     from the API server (w-1's Service still carries c's label, which d's
//     cache does not hold), prune it, and clear the mark.
//   - w-0 is still claimed by c. d leaves it alone while c's Lease is
//     renewed, and takes it over once the Lease has stayed unchanged for
//     the wait; then it prunes w-0's Service the same way.
func TestDeadShardsClaimsAreTakenOver(t *testing.T) {
	kind := setup(t)
	const ns = "takeover"
	known := []string{"c", "d"}
	leases := &shard.Leases{Namespace: ns, Base: "stencil", Wait: 4 * time.Second}
	if err := k8s.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	// Shard c's leader Lease, which the test renews as c's leader would.
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "stencil-c", Namespace: ns}, Spec: coordinationv1.LeaseSpec{HolderIdentity: new("c-0")}}
	if err := k8s.Create(t.Context(), lease); err != nil {
		t.Fatal(err)
	}
	renewing, stopRenewing := context.WithCancel(t.Context())
	lastRenewal := make(chan time.Time, 1)
	go renewLease(renewing, lease, lastRenewal)

	cCtx, stopC := context.WithCancel(t.Context())
	defer stopC()
	cStopped, err := testop.RunShard(cCtx, cluster.Config, scheme, []*render.Kind{kind}, shard.Shards{Name: "c", Known: known, Leases: leases}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var widgets []*testv1alpha1.Widget
	for i := range 2 {
		w := &testv1alpha1.Widget{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("w-%d", i), Namespace: ns, Labels: map[string]string{v1alpha1.LabelShard: "c"}},
			Spec:       testv1alpha1.WidgetSpec{Message: "one", Service: true},
		}
		if err := k8s.Create(t.Context(), w); err != nil {
			t.Fatal(err)
		}
		widgets = append(widgets, w)
	}
	for _, w := range widgets {
		testutil.Eventually(t, time.Minute, w.Name+" Ready, claimed by c", readyAndClaimed(t, w, "c"))
	}
	stopC()
	waitStopped(t, "shard c", cStopped) // c's last reconciles have ended

	patch := func(w *testv1alpha1.Widget, p string) {
		t.Helper()
		if err := k8s.Patch(t.Context(), w, client.RawPatch(types.MergePatchType, []byte(p))); err != nil {
			t.Fatal(err)
		}
	}
	patch(widgets[1], `{"metadata":{"labels":{"stencil.dev/shard":"d","stencil.dev/claimed-by":"d"},"annotations":{"stencil.dev/prune-pending":"true"}},"spec":{"service":false}}`)
	patch(widgets[0], `{"metadata":{"labels":{"stencil.dev/shard":"d"}},"spec":{"service":false}}`)
	if got := widgets[0].Annotations[v1alpha1.AnnotationClaimLease]; got != "stencil-c" {
		t.Fatalf("w-0's claim by c names the Lease %q, want stencil-c", got)
	}
	// Claims never taken over: w-2's holder e has no Lease; w-3's claim by
	// c was not made under a Lease.
	kept := map[string]string{"w-2": `{"stencil.dev/claimed-by":"e"}`, "w-3": `{"stencil.dev/claimed-by":"c"}`}
	for name, claim := range kept {
		w := &testv1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: testv1alpha1.WidgetSpec{Message: "one"}}
		if err := k8s.Create(t.Context(), w); err != nil {
			t.Fatal(err)
		}
		annotations := `{}`
		if name == "w-2" {
			annotations = `{"stencil.dev/claimed-under-lease":"stencil-e"}`
		}
		patch(w, `{"metadata":{"labels":`+strings.Replace(claim, "{", `{"stencil.dev/shard":"d",`, 1)+`,"annotations":`+annotations+`}}`)
	}
	wd := &writes{}
	if err := testop.StartShard(t.Context(), cluster.Config, scheme, []*render.Kind{kind}, shard.Shards{Name: "d", Known: known, Leases: leases}, wd.wrap); err != nil {
		t.Fatal(err)
	}

	testutil.Eventually(t, time.Minute, "w-1 Ready for d", readyAndClaimed(t, widgets[1], "d"))
	testutil.Eventually(t, 30*time.Second, "w-1's Service pruned by d, its mark cleared", prunedByD(t, widgets[1]))

	time.Sleep(3 * leases.Wait) // c's Lease is renewed all along: d must not touch w-0
	if spans := wd.of("/w-0"); len(spans) > 0 {
		t.Fatalf("d wrote w-0 (%s) while c's Lease was renewed", spans[0].path)
	}
	if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(widgets[0]), widgets[0]); err != nil {
		t.Fatal(err)
	}
	if got := widgets[0].Labels[v1alpha1.LabelClaim]; got != "c" {
		t.Fatalf("w-0 claimed by %q while c's Lease was renewed, want c", got)
	}

	stopRenewing()
	renewed := <-lastRenewal
	testutil.Eventually(t, time.Minute, "w-0 Ready, taken over by d", readyAndClaimed(t, widgets[0], "d"))
	testutil.Eventually(t, 30*time.Second, "w-0's Service pruned by d, its mark cleared", prunedByD(t, widgets[0]))
	if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(lease), lease); err != nil {
		t.Fatal(err)
	}
	if got := *lease.Spec.HolderIdentity; got != "taken-over-by-shard-d" {
		t.Errorf("c's Lease is held by %q after the takeover, want taken-over-by-shard-d (a paused leader of c could renew it)", got)
	}
	if d := lease.Spec.LeaseDurationSeconds; d == nil || time.Duration(*d)*time.Second < leases.Wait {
		t.Errorf("the seized Lease's duration is %v, want at least the wait: an elector of c would find it expired and take it back", d)
	}
	first := wd.of("/w-0")[0].start
	t.Logf("c's Lease last renewed %s; d's first write of w-0 %s later", renewed.Format("15:04:05.000"), first.Sub(renewed).Round(time.Millisecond))
	if first.Sub(renewed) < leases.Wait {
		t.Errorf("d wrote w-0 %s after c's last renewal, before the wait (%s)", first.Sub(renewed), leases.Wait)
	}
	time.Sleep(leases.Wait)
	for name, claim := range map[string]string{"w-2": "e", "w-3": "c"} {
		w := &testv1alpha1.Widget{}
		if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, w); err != nil {
			t.Fatal(err)
		}
		if got := w.Labels[v1alpha1.LabelClaim]; got != claim {
			t.Errorf("%s claimed by %q, want still %s (not taken over)", name, got, claim)
		}
		if spans := wd.of("/" + name); len(spans) > 0 {
			t.Errorf("d wrote %s (%s), whose claim it must not take over", name, spans[0].path)
		}
	}
	testutil.Eventually(t, 30*time.Second, "a ClaimTakenOver event", func() error {
		events := &eventsv1.EventList{}
		if err := k8s.List(t.Context(), events, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Regarding.Name == "w-0" && e.Reason == "ClaimTakenOver" && e.Type == corev1.EventTypeWarning {
				t.Logf("event: %s", e.Note)
				return nil
			}
		}
		return fmt.Errorf("no ClaimTakenOver event among %d", len(events.Items))
	})
}

// waitStopped waits until the manager of what has stopped (its Start
// returned, once its reconciles in flight had ended).
func waitStopped(t *testing.T, what string, stopped <-chan error) {
	t.Helper()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("%s stopped with %v", what, err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("%s has not stopped within a minute", what)
	}
}

// renewLease renews lease every half second until ctx ends, then sends
// when its last renewal was done.
func renewLease(ctx context.Context, lease *coordinationv1.Lease, last chan<- time.Time) {
	var done time.Time
	defer func() { last <- done }()
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
		p := fmt.Sprintf(`{"spec":{"renewTime":%q}}`, time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"))
		if err := k8s.Patch(context.WithoutCancel(ctx), lease, client.RawPatch(types.MergePatchType, []byte(p))); err == nil {
			done = time.Now()
		}
	}
}

// readyAndClaimed: w is Ready for its generation and claimed by shard
// (unless STENCIL_TEST_NO_CLAIMS runs the shards without claims, to see a
// test fail without them).
func readyAndClaimed(t *testing.T, w *testv1alpha1.Widget, shard string) func() error {
	t.Helper()
	return func() error {
		if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(w), w); err != nil {
			return err
		}
		c := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionTrue || w.Status.ObservedGeneration != w.Generation {
			return fmt.Errorf("not Ready for generation %d: %+v", w.Generation, c)
		}
		if got := w.Labels[v1alpha1.LabelClaim]; got != shard && os.Getenv("STENCIL_TEST_NO_CLAIMS") == "" {
			return fmt.Errorf("claimed by %q", got)
		}
		return nil
	}
}

// prunedByD: w's Service (which carried shard c's label) is gone, its
// ConfigMap is labelled for shard d and w has no prune-pending mark.
func prunedByD(t *testing.T, w *testv1alpha1.Widget) func() error {
	t.Helper()
	return func() error {
		if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: w.Namespace, Name: w.Name}, &corev1.Service{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Service: %w", err)
		}
		cm := &corev1.ConfigMap{}
		if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: w.Namespace, Name: w.Name + "-config"}, cm); err != nil {
			return err
		}
		if cm.Labels[v1alpha1.LabelShard] != "d" {
			return fmt.Errorf("ConfigMap labels %v", cm.Labels)
		}
		if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(w), w); err != nil {
			return err
		}
		if mark, ok := w.Annotations[v1alpha1.AnnotationPrunePending]; ok {
			return fmt.Errorf("still marked %s=%s", v1alpha1.AnnotationPrunePending, mark)
		}
		return nil
	}
}
