//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// These tests kill operators; they run last (file order).

// TestLeaderFailover runs a second replica, kills the leader, and sees the
// other take over the Lease and reconcile.
func TestLeaderFailover(t *testing.T) {
	standby, err := startOperator("standby")
	if err != nil {
		t.Fatal(err)
	}
	first := leader()
	if first == "" {
		t.Fatal("no Lease holder")
	}
	current.kill()
	current = standby
	eventually(t, 60*time.Second, "the standby holds the Lease", func() error {
		if now := leader(); now == first || now == "" {
			return fmt.Errorf("holder still %q", now)
		}
		return nil
	})
	mustKubectl(t, "apply", "-f", writeFile(t, "apiVersion: flights.com/v1\nkind: FlightTicket\nmetadata: {name: after-failover, namespace: default}\nspec: {from: Oslo, to: Rome, number: 1}\n"))
	waitReady(t, "default", "flightticket/after-failover")
}

// TestKilledWhileConvergingRecovers kills the operator while it converges 50
// resources and starts a new one: every resource converges, with exactly one
// object each, and no object without its owner.
func TestKilledWhileConvergingRecovers(t *testing.T) {
	ns := "crash"
	mustKubectl(t, "create", "namespace", ns)
	var b strings.Builder
	for i := range 50 {
		fmt.Fprintf(&b, "---\napiVersion: flights.com/v1\nkind: FlightTicket\nmetadata: {name: t%02d, namespace: crash}\nspec: {from: A, to: B, number: %d}\n", i, i%10+1)
	}
	file := writeFile(t, b.String())
	created := make(chan error, 1)
	go func() { _, err := kubectl(t, "apply", "-f", file); created <- err }()
	// Killed while it converges: some FlightTickets Ready, not all.
	ready := waitForReady(t, ns, 5)
	current.kill()
	restarted, err := startOperator("restarted")
	if err != nil {
		t.Fatal(err)
	}
	current = restarted
	if ready == 50 {
		t.Fatalf("all 50 FlightTickets were Ready before the kill: it did not hit a convergence")
	}
	t.Logf("the operator killed with %d of 50 FlightTickets Ready", ready)
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	mustKubectl(t, "-n", ns, "wait", "--for=condition=Ready", "--all", "flighttickets", "--timeout=120s")

	owners := strings.Fields(mustKubectl(t, "-n", ns, "get", "configmaps", "-l", "app.kubernetes.io/managed-by=stencil",
		"-o", `jsonpath={range .items[*]}{.metadata.ownerReferences[0].name}{"\n"}{end}`))
	seen := map[string]int{}
	for _, o := range owners {
		seen[o]++
	}
	if len(owners) != 50 || len(seen) != 50 {
		t.Errorf("%d ConfigMaps for %d owners, want 50 for 50: %v", len(owners), len(seen), seen)
	}
	for name := range strings.FieldsSeq(mustKubectl(t, "-n", ns, "get", "flighttickets", "-o", "jsonpath={.items[*].metadata.name}")) {
		if seen[name] != 1 {
			t.Errorf("FlightTicket %s has %d ConfigMaps, want 1", name, seen[name])
		}
	}
}
