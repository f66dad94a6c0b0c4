//go:build e2e

package e2e

import (
	"fmt"
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

// TestReplicaSetPodCount is seed 004 end to end, as the README's tour
// shows it: a Deployment scaled 3 → 5 → 2, its ReplicaSet's pod-count
// label following; another manager's value set back and shown by `stencil
// drift`; no request at rest with 50 decorated ReplicaSets and their pods;
// and a decorator disabled gives up its label everywhere.
func TestReplicaSetPodCount(t *testing.T) {
	const ns = "tour-rs"
	mustKubectl(t, "create", "namespace", ns)
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "namespace", ns, "--wait=false") })
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
	current.stop()
	disabled, err := startBinary("podcount-disabled", binDir+"/stencil", "--disable-decorator=replicaset-podcount")
	if err != nil {
		t.Fatal(err)
	}
	current = disabled
	t.Cleanup(func() {
		current.stop()
		op, err := startOperator("after-podcount-disabled")
		if err != nil {
			t.Errorf("starting the operator again: %v", err)
			return
		}
		current = op
	})
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
	const ns, n = "rest-rs", 50
	mustKubectl(t, "create", "namespace", ns)
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "namespace", ns, "--wait=false") })
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
	time.Sleep(3 * time.Second) // the last events drain
	since := time.Now()
	time.Sleep(10 * time.Second)
	var sent []string
	for _, e := range auditEvents(t, operatorUser, since) {
		if e.Verb != "watch" && e.ObjectRef.Resource != "leases" {
			sent = append(sent, fmt.Sprintf("%s %s %s/%s", e.Verb, e.ObjectRef.Resource, e.ObjectRef.Namespace, e.ObjectRef.Name))
		}
	}
	t.Logf("at rest with %d decorated ReplicaSets and their pods: %d requests in 10 s (Lease renewals aside)", n, len(sent))
	if len(sent) != 0 {
		t.Errorf("requests at rest: %v", sent)
	}
}
