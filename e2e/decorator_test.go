//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// podCountLabels is `kubectl get rs --show-labels` in ns, and whether every
// ReplicaSet there carries pod-count=want ("" for none at all).
func podCountLabels(t *testing.T, ns, want string) (string, error) {
	t.Helper()
	out := mustKubectl(t, "-n", ns, "get", "rs", "--show-labels")
	lines := strings.Split(strings.TrimSpace(out), "\n")[1:]
	if len(lines) == 0 {
		return out, fmt.Errorf("no ReplicaSet yet")
	}
	for _, line := range lines {
		has := strings.Contains(line, "pod-count=")
		if want == "" && has || want != "" && !strings.Contains(line, "pod-count="+want+",") && !strings.HasSuffix(line, "pod-count="+want) {
			return out, fmt.Errorf("want pod-count=%q:\n%s", want, out)
		}
	}
	return out, nil
}

// podCountFlags enable replicaset-podcount as the seed-004 sample does
// (config/samples/replicaset-podcount): in the namespaces labelled
// stencil.dev/podcount=on.
var podCountFlags = []string{"--decorators=replicaset-podcount", "--decorator-namespace-selector=replicaset-podcount=stencil.dev/podcount=on"}

// useOperator replaces the current operator by one started with flags; the
// suite's operator, without flags, runs again when the test ends.
func useOperator(t *testing.T, name string, flags ...string) {
	t.Helper()
	current.stop()
	op, err := startBinary(name, filepath.Join(binDir, "stencil"), flags...)
	if err != nil {
		t.Fatal(err)
	}
	current = op
}

// restoreOperator starts the suite's operator again, without flags.
func restoreOperator(t *testing.T, name string) {
	t.Helper()
	current.stop()
	op, err := startOperator(name)
	if err != nil {
		t.Errorf("starting the operator again: %v", err)
		return
	}
	current = op
}

// holdsNothing: no ReplicaSet in ns carries pod-count or a field of
// replicaset-podcount's field manager.
func holdsNothing(t *testing.T, ns string) error {
	t.Helper()
	if out, err := podCountLabels(t, ns, ""); err != nil {
		return fmt.Errorf("%w\n%s", err, out)
	}
	managers := mustKubectl(t, "-n", ns, "get", "rs", "--show-managed-fields", "-o", "jsonpath={.items[*].metadata.managedFields[*].manager}")
	if strings.Contains(managers, "stencil-decorator-replicaset-podcount") {
		return fmt.Errorf("field managers %s", managers)
	}
	return nil
}

// stays checks for d that check keeps passing.
func stays(t *testing.T, d time.Duration, what string, check func() error) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		if err := check(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

// TestDecoratorsAreOptIn: a stencil started without --decorators neither
// watches nor writes ReplicaSets. With replicaset-podcount enabled for the
// namespaces labelled stencil.dev/podcount=on, it decorates the
// ReplicaSets there and nowhere else, and removes what it set from a
// namespace that loses the label. Started again without --decorators, it
// leaves the labels as they are and says so in its log.
func TestDecoratorsAreOptIn(t *testing.T) {
	const in, out = "optin-in", "optin-out"
	for _, ns := range []string{in, out} {
		mustKubectl(t, "create", "namespace", ns)
		t.Cleanup(func() { _, _ = kubectl(t, "delete", "namespace", ns, "--wait=false") })
		mustKubectl(t, "-n", ns, "create", "deployment", "web", "--image=nginx", "--replicas=1")
	}
	for _, ns := range []string{in, out} {
		eventually(t, time.Minute, "a ready ReplicaSet in "+ns, func() error {
			if ready := mustKubectl(t, "-n", ns, "get", "rs", "-o", "jsonpath={.items[*].status.readyReplicas}"); ready != "1" {
				return fmt.Errorf("ready replicas %q", ready)
			}
			return nil
		})
	}
	stays(t, 5*time.Second, "without --decorators", func() error {
		return errors.Join(holdsNothing(t, in), holdsNothing(t, out))
	})
	for _, e := range auditEvents(t, operatorUser, current.started) {
		if e.ObjectRef.Resource == "replicasets" && e.Verb != "list" {
			t.Errorf("without --decorators the operator sent %s %s %s/%s", e.Verb, e.ObjectRef.Resource, e.ObjectRef.Namespace, e.ObjectRef.Name)
		}
	}

	useOperator(t, "optin", podCountFlags...)
	t.Cleanup(func() { restoreOperator(t, "after-optin") })
	mustKubectl(t, "label", "namespace", in, "stencil.dev/podcount=on")
	eventually(t, time.Minute, "pod-count=1 in "+in, func() error {
		_, err := podCountLabels(t, in, "1")
		return err
	})
	stays(t, 3*time.Second, "in a namespace without the label", func() error { return holdsNothing(t, out) })

	mustKubectl(t, "label", "namespace", in, "stencil.dev/podcount-")
	eventually(t, time.Minute, "pod-count removed in "+in, func() error { return holdsNothing(t, in) })

	// What an earlier stencil set, a stencil with the decorator off leaves
	// as it is, and tells.
	mustKubectl(t, "label", "namespace", in, "stencil.dev/podcount=on")
	eventually(t, time.Minute, "pod-count=1 again in "+in, func() error {
		_, err := podCountLabels(t, in, "1")
		return err
	})
	useOperator(t, "optin-off")
	eventually(t, 30*time.Second, "the leftovers told in the log", func() error {
		log, err := os.ReadFile(current.logPath)
		if err != nil {
			return err
		}
		for line := range strings.SplitSeq(string(log), "\n") {
			if strings.Contains(line, `"decorator":"replicaset-podcount"`) && strings.Contains(line, "--disable-decorator") {
				t.Logf("the operator's log: %s", line)
				return nil
			}
		}
		return fmt.Errorf("not in the log:\n%s", current.logTail())
	})
	if labels, err := podCountLabels(t, in, "1"); err != nil {
		t.Errorf("with the decorator off: %v\n%s", err, labels)
	}
}

// TestReplicaSetPodCount is seed 004 end to end, as the README's tour
// shows it: the decorator enabled for the namespaces labelled
// stencil.dev/podcount=on, a Deployment scaled 3 → 5 → 2, its ReplicaSet's
// pod-count label following; another manager's value set back and shown
// by `stencil drift`; no request at rest with 50 decorated ReplicaSets and
// their pods; and a decorator disabled gives up its label everywhere.
func TestReplicaSetPodCount(t *testing.T) {
	const ns = "tour-rs"
	useOperator(t, "podcount", podCountFlags...)
	t.Cleanup(func() { restoreOperator(t, "after-podcount") })
	mustKubectl(t, "create", "namespace", ns)
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "namespace", ns, "--wait=false") })
	mustKubectl(t, "label", "namespace", ns, "stencil.dev/podcount=on")
	mustKubectl(t, "-n", ns, "create", "deployment", "web", "--image=nginx", "--replicas=3")
	for _, n := range []string{"3", "5", "2"} {
		if n != "3" {
			mustKubectl(t, "-n", ns, "scale", "deployment", "web", "--replicas="+n)
		}
		var out string
		eventually(t, time.Minute, "pod-count="+n, func() (err error) {
			out, err = podCountLabels(t, ns, n)
			return err
		})
		t.Logf("scaled to %s:\n$ kubectl get rs --show-labels\n%s", n, out)
	}

	rs := strings.TrimPrefix(strings.TrimSpace(mustKubectl(t, "-n", ns, "get", "rs", "-o", "name")), "replicaset.apps/")
	mustKubectl(t, "-n", ns, "label", "rs", rs, "pod-count=9", "--overwrite")
	eventually(t, 30*time.Second, "pod-count set back to 2", func() error {
		_, err := podCountLabels(t, ns, "2")
		return err
	})
	out, code := stencil(t, "drift", "-n", ns, "replicaset-podcount/"+rs)
	if code != 0 || !strings.Contains(out, `holds label pod-count="2"`) || !strings.Contains(out, "Set back 1 time(s)") || !strings.Contains(out, `desired "2", was "9" by kubectl-label`) {
		t.Errorf("stencil drift (exit %d):\n%s", code, out)
	}
	t.Logf("$ kubectl stencil drift replicaset-podcount/%s\n%s", rs, out)

	atRest(t)

	// Disabled, the decorator gives up its label on every ReplicaSet.
	useOperator(t, "podcount-disabled", "--disable-decorator=replicaset-podcount")
	for _, namespace := range []string{"rest-rs", ns} {
		eventually(t, time.Minute, "no pod-count label in "+namespace, func() (err error) {
			out, err = podCountLabels(t, namespace, "")
			return err
		})
	}
	t.Logf("decorator disabled:\n$ kubectl get rs --show-labels\n%s", out)
}

// atRest: with 50 decorated ReplicaSets and their pods converged, the
// operator sends nothing for 10 s but its Lease renewals.
func atRest(t *testing.T) {
	t.Helper()
	const ns, n = "rest-rs", 50
	mustKubectl(t, "create", "namespace", ns)
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "namespace", ns, "--wait=false") })
	mustKubectl(t, "label", "namespace", ns, "stencil.dev/podcount=on")
	for i := range n {
		mustKubectl(t, "-n", ns, "create", "deployment", fmt.Sprintf("web-%d", i), "--image=nginx", "--replicas=1")
	}
	eventually(t, 2*time.Minute, "50 ReplicaSets with pod-count=1", func() error {
		out, err := podCountLabels(t, ns, "1")
		if err == nil && strings.Count(out, "pod-count=1") != n {
			return fmt.Errorf("%d labelled", strings.Count(out, "pod-count=1"))
		}
		return err
	})
	// The last events drain: the operator has sent nothing for 3 s.
	waitAuditQuiet(t, operatorUser, 3*time.Second, 2*time.Minute, atRestCounts)
	since := time.Now()
	time.Sleep(10 * time.Second)
	var sent []string
	for _, e := range auditEvents(t, operatorUser, since) {
		if atRestCounts(e) {
			sent = append(sent, fmt.Sprintf("%s %s %s/%s", e.Verb, e.ObjectRef.Resource, e.ObjectRef.Namespace, e.ObjectRef.Name))
		}
	}
	t.Logf("at rest with %d decorated ReplicaSets and their pods: %d requests in 10 s (Lease renewals aside)", n, len(sent))
	if len(sent) != 0 {
		t.Errorf("requests at rest: %v", sent)
	}
}

// atRestCounts: a request that an operator at rest does not send (its
// watches and Lease renewals aside).
func atRestCounts(e auditEvent) bool {
	return e.Verb != "watch" && e.ObjectRef.Resource != "leases"
}
