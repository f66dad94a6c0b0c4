//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestSeedSamplesBecomeReady applies the seeds' own custom resources,
// unchanged, and waits for every one to be Ready.
func TestSeedSamplesBecomeReady(t *testing.T) {
	mustKubectl(t, "apply", "-f", "../config/samples/")
	mustKubectl(t, "wait", "--for=condition=Ready", "--timeout=90s",
		"memcached/example-memcached", "myweb/myweb", "foo/example-foo", "flightticket/my-flight-ticket", "guestbook/guestbook-sample", "appstack/shop")
	out := mustKubectl(t, "get", "stencil")
	t.Logf("kubectl get stencil:\n%s", out)
}

// TestSpecChangePrunes renames Foo's Deployment: the new one is applied,
// the old one pruned.
func TestSpecChangePrunes(t *testing.T) {
	ns := "prune"
	mustKubectl(t, "create", "namespace", ns)
	mustKubectl(t, "apply", "-f", writeFile(t, "apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\nmetadata: {name: foo, namespace: prune}\nspec: {deploymentName: first, replicas: 1}\n"))
	waitReady(t, ns, "foo/foo")
	mustKubectl(t, "-n", ns, "get", "deployment", "first")
	mustKubectl(t, "-n", ns, "patch", "foo", "foo", "--type=merge", "-p", `{"spec":{"deploymentName":"second"}}`)
	eventually(t, 30*time.Second, "second applied, first pruned", func() error {
		names := mustKubectl(t, "-n", ns, "get", "deployments", "-o", "jsonpath={.items[*].metadata.name}")
		if names != "second" {
			return fmt.Errorf("deployments: %q", names)
		}
		return nil
	})
}

// TestDeletingAResourceRemovesItsChildren deletes a Guestbook.
func TestDeletingAResourceRemovesItsChildren(t *testing.T) {
	ns := "delete"
	mustKubectl(t, "create", "namespace", ns)
	mustKubectl(t, "apply", "-f", writeFile(t, "apiVersion: webapp.my.domain/v1\nkind: Guestbook\nmetadata: {name: gb, namespace: delete}\nspec: {size: 2, configMapName: gb-cfg}\n"))
	waitReady(t, ns, "guestbook/gb")
	mustKubectl(t, "-n", ns, "delete", "guestbook", "gb")
	// kube-controller-manager's garbage collector deletes them; it learns of
	// a CRD only at its next discovery (every 30 s), so, in a suite just
	// started, that may come first.
	eventually(t, 3*time.Minute, "children garbage-collected", func() error {
		left := mustKubectl(t, "-n", ns, "get", "deployments,configmaps,pods", "-l", "app.kubernetes.io/name=guestbook", "-o", "name")
		if strings.TrimSpace(left) != "" {
			return fmt.Errorf("left: %s", left)
		}
		return nil
	})
}

// TestInvalidResourceIsRefused: the API server refuses a bad spec with a
// message that names the field (every rule is covered in internal/operator/kinds).
func TestInvalidResourceIsRefused(t *testing.T) {
	out, err := kubectl(t, "apply", "-f", writeFile(t, "apiVersion: flights.com/v1\nkind: FlightTicket\nmetadata: {name: bad, namespace: default}\nspec: {from: A, to: B, number: 11}\n"))
	if err == nil || !strings.Contains(err.Error(), "spec.number") {
		t.Fatalf("want a refusal naming spec.number; got %v\n%s", err, out)
	}
}
