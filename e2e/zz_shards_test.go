//go:build e2e

package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// shardProcess is one stencil process of a sharded install, running as its
// own ServiceAccount so that the audit log tells its requests apart.
type shardProcess struct {
	op    *operator
	shard string // "default" for the default shard
	user  string
}

// startShard runs bin/stencil with the shard flags of a Deployment of
// config/sharded, as the ServiceAccount stencil-<name>.
func startShard(t *testing.T, name string, flags []string) *shardProcess {
	t.Helper()
	sa := "stencil-" + name
	shard := "default"
	for _, f := range flags {
		if s, ok := strings.CutPrefix(f, "--shard="); ok {
			shard = s
		}
	}
	op, err := launch(name, filepath.Join(binDir, "stencil"), serviceAccountKubeconfig(t, sa), flags...)
	if err != nil {
		t.Fatal(err)
	}
	return &shardProcess{op: op, shard: shard, user: "system:serviceaccount:stencil-system:" + sa}
}

// shardFlags are the --shard and --shards flags of each Deployment that
// config/sharded builds, by the Deployment's name.
func shardFlags(t *testing.T) map[string][]string {
	t.Helper()
	flags := map[string][]string{}
	for doc := range strings.SplitSeq(mustKubectl(t, "kustomize", "../config/sharded"), "\n---\n") {
		var d struct {
			Kind     string
			Metadata struct{ Name string }
			Spec     struct {
				Template struct {
					Spec struct{ Containers []struct{ Args []string } }
				}
			}
		}
		if err := yaml.Unmarshal([]byte(doc), &d); err != nil {
			t.Fatal(err)
		}
		if d.Kind != "Deployment" {
			continue
		}
		for _, arg := range d.Spec.Template.Spec.Containers[0].Args {
			if strings.HasPrefix(arg, "--shard") {
				flags[d.Metadata.Name] = append(flags[d.Metadata.Name], arg)
			}
		}
	}
	return flags
}

// shardALeaseHolder is the holder of shard a's Lease,
// stencil.stencil.dev-a in stencil-system.
func shardALeaseHolder() string {
	out, _ := kubectlAdmin("-n", "stencil-system", "get", "lease", "stencil.stencil.dev-a", "-o", "jsonpath={.spec.holderIdentity}")
	return out
}

// TestThreeShards: 300 FlightTickets over the three shards of
// config/sharded (the default shard, a and b; each process run with its
// Deployment's shard flags), each reconciled by its shard's processes only, as the audit log
// shows; shard a's leader killed and its standby taking over; a ticket
// relabelled from a to b, then written by b only.
func TestThreeShards(t *testing.T) {
	const ns = shardsNamespace
	// The suite's unsharded operators would reconcile every shard's
	// resources, and one holds the default shard's Lease: every one still
	// running is stopped for this test, and one started again after it.
	for _, o := range running {
		select {
		case <-o.exited:
		default:
			o.stop()
		}
	}
	t.Cleanup(func() {
		if op, err := startOperator("after-shards"); err == nil {
			current = op
		} else {
			t.Errorf("starting an operator after the shards: %v", err)
		}
		_, _ = kubectl(t, "delete", "namespace", ns, "--wait=false")
	})
	flags := shardFlags(t)
	if len(flags) != 3 || len(flags["stencil-a"]) != 2 || len(flags["stencil-b"]) != 2 || len(flags["stencil"]) != 1 {
		t.Fatalf("config/sharded: shard flags %v; want the Deployments stencil, stencil-a and stencil-b", flags)
	}
	def := startShard(t, "shard-default", flags["stencil"])
	a1 := startShard(t, "shard-a1", flags["stencil-a"])
	eventually(t, 60*time.Second, "shard a's first process leads", func() error {
		if shardALeaseHolder() == "" {
			return fmt.Errorf("no holder of the Lease stencil.stencil.dev-a")
		}
		return nil
	})
	leaderA := shardALeaseHolder()
	a2 := startShard(t, "shard-a2", flags["stencil-a"])
	b := startShard(t, "shard-b", flags["stencil-b"])
	processes := []*shardProcess{def, a1, a2, b}
	t.Cleanup(func() {
		for _, p := range processes {
			select {
			case <-p.op.exited:
			default:
				p.op.stop()
			}
		}
	})

	mustKubectl(t, "create", "namespace", ns)
	since := time.Now()
	var manifest strings.Builder
	shardOf := map[string]string{}
	for i := range 300 {
		name, label := fmt.Sprintf("t%03d", i), ""
		switch i % 3 {
		case 0:
			shardOf[name] = "default"
		case 1:
			shardOf[name], label = "a", "\n  labels: {stencil.dev/shard: a}"
		case 2:
			shardOf[name], label = "b", "\n  labels: {stencil.dev/shard: b}"
		}
		fmt.Fprintf(&manifest, "---\napiVersion: flights.com/v1\nkind: FlightTicket\nmetadata:\n  name: %s\n  namespace: %s%s\nspec: {from: Oslo, to: Rome, number: %d}\n", name, ns, label, i%10+1)
	}
	mustKubectl(t, "apply", "-f", writeFile(t, manifest.String()))
	mustKubectl(t, "-n", ns, "wait", "--for=condition=Ready", "--all", "flighttickets", "--timeout=180s")
	checkClaims(t, ns, shardOf)
	checkWritesInShard(t, processes, shardOf, since)

	// Shard a's leader dies; its standby takes the Lease and reconciles.
	killed := a1
	if shardALeaseHolder() != leaderA {
		t.Fatalf("shard a's Lease changed hands before the kill")
	}
	killed.op.kill()
	eventually(t, 60*time.Second, "shard a's standby holds its Lease", func() error {
		if h := shardALeaseHolder(); h == leaderA || h == "" {
			return fmt.Errorf("holder %q", h)
		}
		return nil
	})
	afterKill := time.Now()
	mustKubectl(t, "-n", ns, "patch", "flightticket", "t001", "--type=merge", "-p", `{"spec":{"to":"Lima"}}`)
	waitBooking(t, ns, "t001", "Lima")
	if writes := writesOf(t, a2.user, afterKill, "t001"); len(writes) == 0 {
		t.Errorf("shard a's standby wrote nothing for t001 after the takeover")
	}

	// t004 moves from shard a to shard b.
	moved := time.Now()
	mustKubectl(t, "-n", ns, "label", "flightticket", "t004", "stencil.dev/shard=b", "--overwrite")
	eventually(t, 60*time.Second, "t004 claimed by b", func() error {
		if got := mustKubectl(t, "-n", ns, "get", "flightticket", "t004", "-o", "jsonpath={.metadata.labels.stencil\\.dev/claimed-by}"); got != "b" {
			return fmt.Errorf("claimed by %q", got)
		}
		return nil
	})
	mustKubectl(t, "-n", ns, "patch", "flightticket", "t004", "--type=merge", "-p", `{"spec":{"to":"Quito"}}`)
	waitBooking(t, ns, "t004", "Quito")
	shardOf["t004"] = "b"
	checkClaims(t, ns, shardOf)
	for _, p := range []*shardProcess{def, a2} {
		if writes := writesOf(t, p.user, moved.Add(2*time.Second), "t004"); len(writes) > 0 {
			t.Errorf("%s wrote for t004 after it moved to shard b: %v", p.op.name, writes)
		}
	}
	if writes := writesOf(t, b.user, moved, "t004"); len(writes) == 0 {
		t.Error("shard b wrote nothing for t004 after it moved there")
	}
	checkWritesInShard(t, processes, shardOf, moved.Add(2*time.Second))
	out := mustKubectl(t, "-n", ns, "get", "flighttickets", "t004", "t005", "-o", "wide")
	t.Logf("$ kubectl get flighttickets t004 t005 -o wide\n%s", out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "SHARD") || !strings.HasSuffix(lines[1], " b") || !strings.HasSuffix(lines[2], " b") {
		t.Errorf("kubectl get -o wide does not show shard b for t004 and t005")
	}
}

// checkClaims: every FlightTicket of ns is claimed by its shard.
func checkClaims(t *testing.T, ns string, shardOf map[string]string) {
	t.Helper()
	out := mustKubectl(t, "-n", ns, "get", "flighttickets", "-o", `jsonpath={range .items[*]}{.metadata.name}={.metadata.labels.stencil\.dev/claimed-by}{"\n"}{end}`)
	claimed := 0
	for line := range strings.FieldsSeq(out) {
		name, claim, _ := strings.Cut(line, "=")
		if claim != shardOf[name] {
			t.Errorf("%s is claimed by %q, want shard %q", name, claim, shardOf[name])
		}
		claimed++
	}
	if claimed != len(shardOf) {
		t.Errorf("%d FlightTickets, want %d", claimed, len(shardOf))
	}
}

// checkWritesInShard: since then, each process wrote (applied, patched
// status, claimed) only FlightTickets of its own shard and their
// ConfigMaps.
func checkWritesInShard(t *testing.T, processes []*shardProcess, shardOf map[string]string, since time.Time) {
	t.Helper()
	for _, p := range processes {
		count := 0
		for _, e := range auditEvents(t, p.user, since) {
			ticket, ok := ticketWritten(e)
			if !ok {
				continue
			}
			count++
			if shardOf[ticket] != p.shard {
				t.Errorf("%s (shard %s) wrote %s %s/%s, of %s, a ticket of shard %q", p.op.name, p.shard, e.Verb, e.ObjectRef.Resource, e.ObjectRef.Name, ticket, shardOf[ticket])
			}
		}
		t.Logf("%s (shard %s): %d writes of FlightTickets and their ConfigMaps", p.op.name, p.shard, count)
	}
}

// shardsNamespace holds TestThreeShards's FlightTickets.
const shardsNamespace = "shards"

// ticketWritten is the FlightTicket of TestThreeShards a write is for: the ticket itself, or
// its ConfigMap <ticket>-booking.
func ticketWritten(e auditEvent) (string, bool) {
	if e.ObjectRef.Namespace != shardsNamespace {
		return "", false // other tests' tickets, which the default shard takes
	}
	if !slices.Contains([]string{"create", "update", "patch", "delete"}, e.Verb) || e.Response.Code >= 300 {
		return "", false
	}
	switch e.ObjectRef.Resource {
	case "flighttickets":
		return e.ObjectRef.Name, true
	case "configmaps":
		return strings.CutSuffix(e.ObjectRef.Name, "-booking")
	}
	return "", false
}

// writesOf lists user's writes for ticket since then.
func writesOf(t *testing.T, user string, since time.Time, ticket string) []string {
	t.Helper()
	var out []string
	for _, e := range auditEvents(t, user, since) {
		if name, ok := ticketWritten(e); ok && name == ticket {
			out = append(out, e.Verb+" "+e.ObjectRef.Resource+"/"+e.ObjectRef.Name)
		}
	}
	return out
}

// waitBooking waits until ticket's ConfigMap says it flies to dest and the
// ticket is Ready for its generation.
func waitBooking(t *testing.T, ns, ticket, dest string) {
	t.Helper()
	eventually(t, 60*time.Second, ticket+"'s booking to "+dest, func() error {
		out, err := kubectl(t, "-n", ns, "get", "configmap", ticket+"-booking", "-o", "jsonpath={.data}")
		if err != nil || !strings.Contains(out, dest) {
			return fmt.Errorf("booking %s: %w", out, err)
		}
		return nil
	})
	mustKubectl(t, "-n", ns, "wait", "flightticket/"+ticket, "--for=condition=Ready", "--timeout=60s")
}
