//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestDeploymentLifecycle proves the control plane's plumbing: a Deployment
// created with kubectl becomes Available with Running pods on a kwok node, and
// deleting it garbage-collects its ReplicaSet and pods.
func TestDeploymentLifecycle(t *testing.T) {
	ns := "smoke-deployment"
	mustKubectl(t, "create", "namespace", ns)
	mustKubectl(t, "-n", ns, "create", "deployment", "web", "--image=nginx:1.27", "--replicas=3")
	mustKubectl(t, "-n", ns, "wait", "deployment/web", "--for=condition=Available", "--timeout=90s")

	eventually(t, 60*time.Second, "3 Running pods", func() error {
		phases := mustKubectl(t, "-n", ns, "get", "pods", "-l", "app=web", "-o", "jsonpath={.items[*].status.phase}")
		if got := strings.Fields(phases); len(got) != 3 || strings.Count(phases, "Running") != 3 {
			return fmt.Errorf("pod phases %q", phases)
		}
		return nil
	})
	if rs := mustKubectl(t, "-n", ns, "get", "replicasets", "-l", "app=web", "-o", "name"); strings.TrimSpace(rs) == "" {
		t.Fatal("no ReplicaSet behind the Deployment")
	}

	mustKubectl(t, "-n", ns, "delete", "deployment", "web", "--wait=true")
	eventually(t, 60*time.Second, "ReplicaSet and pods garbage-collected", func() error {
		left := mustKubectl(t, "-n", ns, "get", "replicasets,pods", "-l", "app=web", "-o", "name")
		if strings.TrimSpace(left) != "" {
			return fmt.Errorf("still present:\n%s", left)
		}
		return nil
	})
}
