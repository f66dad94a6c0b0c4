//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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

// TestOperatorBinaryStarts runs the real stencil binary against the cluster
// and waits for its readiness probe.
func TestOperatorBinaryStarts(t *testing.T) {
	probe := "127.0.0.1:18081"
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "stencil"),
		"--metrics-bind-address=0", "--health-probe-bind-address="+probe)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig)
	log, err := os.Create(filepath.Join(t.TempDir(), "stencil.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting stencil (did `make build` run?): %v", err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	eventually(t, 30*time.Second, "stencil /readyz answers 200", func() error {
		resp, err := http.Get("http://" + probe + "/readyz")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz: %s", resp.Status)
		}
		return nil
	})
}
