//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestHandedOverReplicas follows docs/sharing.md: a Memcached with
// autoscaled: true leaves replicas to whoever scales it (kubectl scale
// here, an autoscaler in a cluster), on the next render too, and reports
// no drift.
func TestHandedOverReplicas(t *testing.T) {
	ns := "sharing"
	mustKubectl(t, "create", "namespace", ns)
	mustKubectl(t, "apply", "-f", "../docs/examples/sharing/memcached-autoscaled.yaml")
	waitReady(t, ns, "memcached/cache")
	mustKubectl(t, "-n", ns, "scale", "deployment", "cache", "--replicas=5")
	mustKubectl(t, "-n", ns, "patch", "memcached", "cache", "--type=merge", "-p", `{"spec":{"size":3}}`)
	eventually(t, 30*time.Second, "the new render reconciled", func() error {
		gen := mustKubectl(t, "-n", ns, "get", "memcached", "cache", "-o", "jsonpath={.metadata.generation}/{.status.observedGeneration}")
		if a, b, _ := strings.Cut(gen, "/"); a != b {
			return fmt.Errorf("generation/observedGeneration = %s", gen)
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	if got := mustKubectl(t, "-n", ns, "get", "deployment", "cache", "-o", "jsonpath={.spec.replicas}"); got != "5" {
		t.Errorf("replicas = %s, want 5 (kubectl scale's)", got)
	}
	if got := mustKubectl(t, "-n", ns, "get", "memcached", "cache", "-o", `jsonpath={.status.conditions[?(@.type=="Drifted")].status}`); got != "False" {
		t.Errorf("Drifted = %q, want False", got)
	}
}

// TestUnavailableDeploymentIsNotReady follows docs/sharing.md: in a
// namespace whose quota lets no pod start, a Memcached is applied but not
// Ready (Progressing); once pods may start, it turns Ready by itself.
func TestUnavailableDeploymentIsNotReady(t *testing.T) {
	ns := "health"
	mustKubectl(t, "create", "namespace", ns)
	mustKubectl(t, "create", "quota", "no-pods", "-n", ns, "--hard=pods=0")
	mustKubectl(t, "apply", "-f", "../docs/examples/sharing/memcached-health.yaml")
	ready := `jsonpath={.status.conditions[?(@.type=="Ready")].reason}`
	eventually(t, 30*time.Second, "Memcached Progressing", func() error {
		if got := mustKubectl(t, "-n", ns, "get", "memcached", "cache", "-o", ready); got != "Progressing" {
			return fmt.Errorf("Ready reason %q", got)
		}
		return nil
	})
	message := mustKubectl(t, "-n", ns, "get", "memcached", "cache", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].message}`)
	t.Logf("Ready: %s", message)
	if !strings.Contains(message, "Deployment cache: ") {
		t.Errorf("Ready message %q does not name the Deployment", message)
	}
	mustKubectl(t, "delete", "quota", "no-pods", "-n", ns)
	mustKubectl(t, "wait", "--for=condition=Ready", "-n", ns, "memcached/cache", "--timeout=2m")
}
