//go:build e2e

package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// stencil runs the real bin/stencil CLI as cluster admin and returns its
// standard output and exit code.
func stencil(t *testing.T, args ...string) (string, int) {
	t.Helper()
	return stencilBinary(t, filepath.Join(binDir, "stencil"), args...)
}

// stencilBinary is stencil with another build.
func stencilBinary(t *testing.T, bin string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return stdout.String(), 0
	case errors.As(err, &exit):
		return stdout.String() + stderr.String(), exit.ExitCode()
	default:
		t.Fatalf("running stencil %v: %v", args, err)
		return "", -1
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cr.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func waitReady(t *testing.T, ns, ref string) {
	t.Helper()
	mustKubectl(t, "-n", ns, "wait", ref, "--for=condition=Ready", "--timeout=60s")
}

// TestRenderIsWhatTheOperatorApplies renders a seed CR offline (the live
// resource, for its UID) and compares each object's desired hash, a hash of
// its whole content, with the live object's.
func TestRenderIsWhatTheOperatorApplies(t *testing.T) {
	mustKubectl(t, "create", "namespace", "render")
	mustKubectl(t, "-n", "render", "apply", "-f", "../config/samples/foo.yaml")
	waitReady(t, "render", "foo/example-foo")
	live := writeFile(t, mustKubectl(t, "-n", "render", "get", "foo", "example-foo", "-o", "yaml"))

	out, code := stencil(t, "render", "-f", live)
	if code != 0 {
		t.Fatalf("stencil render exited %d:\n%s", code, out)
	}
	docs := strings.Split(out, "---\n")
	rendered := 0
	for _, doc := range docs {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name        string            `json:"name"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		if strings.TrimSpace(doc) == "" {
			continue
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		rendered++
		want := obj.Metadata.Annotations["stencil.dev/desired-hash"]
		got := mustKubectl(t, "-n", "render", "get", obj.Kind, obj.Metadata.Name, "-o", `jsonpath={.metadata.annotations.stencil\.dev/desired-hash}`)
		if want == "" || got != want {
			t.Errorf("%s %s: rendered hash %q, applied %q", obj.Kind, obj.Metadata.Name, want, got)
		}
	}
	if rendered != 1 {
		t.Errorf("rendered %d objects for a Foo, want 1:\n%s", rendered, out)
	}
}

// TestDiffExitCodes: 0 when the cluster matches, 1 with a diff when it does
// not, 2 on error.
func TestDiffExitCodes(t *testing.T) {
	mustKubectl(t, "create", "namespace", "diff")
	mustKubectl(t, "-n", "diff", "apply", "-f", "../config/samples/flightticket.yaml")
	waitReady(t, "diff", "flightticket/my-flight-ticket")

	same := writeFile(t, "apiVersion: flights.com/v1\nkind: FlightTicket\nmetadata: {name: my-flight-ticket, namespace: diff}\nspec: {from: Mumbai, to: London, number: 2}\n")
	if out, code := stencil(t, "diff", "-f", same); code != 0 || out != "" {
		t.Errorf("diff of an unchanged resource: exit %d, output:\n%s", code, out)
	}
	changed := writeFile(t, "apiVersion: flights.com/v1\nkind: FlightTicket\nmetadata: {name: my-flight-ticket, namespace: diff}\nspec: {from: Mumbai, to: Paris, number: 2}\n")
	out, code := stencil(t, "diff", "-f", changed)
	if code != 1 || !strings.Contains(out, "-  to: London") || !strings.Contains(out, "+  to: Paris") || !strings.Contains(out, "live/ConfigMap/diff/my-flight-ticket-booking") {
		t.Errorf("diff of a changed resource: exit %d, want 1 and the changed line; output:\n%s", code, out)
	}
	unknown := writeFile(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
	if out, code := stencil(t, "diff", "-f", unknown); code != 2 || !strings.Contains(out, "unknown kind") {
		t.Errorf("diff of an unknown kind: exit %d, want 2; output:\n%s", code, out)
	}
}

// TestDriftIsReportedAndCorrected changes owned fields with kubectl and sees
// the drift in `kubectl get -o yaml` and `stencil drift`: reverted under
// Correct, left under Report.
func TestDriftIsReportedAndCorrected(t *testing.T) {
	ns := "drift"
	mustKubectl(t, "create", "namespace", ns)
	// The seed MyWeb in its own namespace, with its own node port (30100 is
	// the seed's, applied in another test).
	web := strings.Replace(mustReadFile(t, "../config/samples/myweb.yaml"), "namespace: default", "namespace: "+ns, 1)
	web = strings.Replace(web, "nodePortNumber: 30100", "nodePortNumber: 30150", 1)
	mustKubectl(t, "apply", "-f", writeFile(t, web))
	waitReady(t, ns, "myweb/myweb")

	// Correct (the default): kubectl scale is reverted, and recorded.
	mustKubectl(t, "-n", ns, "scale", "deployment/myweb", "--replicas=4")
	eventually(t, 30*time.Second, "the scale reverted and recorded", func() error {
		replicas := mustKubectl(t, "-n", ns, "get", "deployment", "myweb", "-o", "jsonpath={.spec.replicas}")
		status := mustKubectl(t, "-n", ns, "get", "myweb", "myweb", "-o", "yaml")
		if replicas != "1" || !strings.Contains(status, "path: .spec.replicas") || !strings.Contains(status, "reverted: true") {
			return fmt.Errorf("replicas %s, status:\n%s", replicas, status)
		}
		return nil
	})

	// Report: a kubectl edit-style patch stays, and Drifted=True.
	mustKubectl(t, "-n", ns, "patch", "myweb", "myweb", "--type=merge", "-p", `{"spec":{"driftPolicy":"Report"}}`)
	waitReady(t, ns, "myweb/myweb")
	mustKubectl(t, "-n", ns, "patch", "configmap", "myweb-html", "--type=merge", "-p", `{"data":{"index.html":"<h1>edited</h1>"}}`)
	eventually(t, 30*time.Second, "Drifted=True", func() error {
		drifted := mustKubectl(t, "-n", ns, "get", "myweb", "myweb", "-o", `jsonpath={.status.conditions[?(@.type=="Drifted")].status}`)
		if drifted != "True" {
			return fmt.Errorf("Drifted=%q", drifted)
		}
		return nil
	})
	out, code := stencil(t, "drift", "-n", ns, "web/myweb")
	if code != 0 || !strings.Contains(out, `.data["index.html"]`) && !strings.Contains(out, ".data.index.html") || !strings.Contains(out, "kubectl-patch") || !strings.Contains(out, "<h1>edited</h1>") {
		t.Errorf("stencil drift: exit %d, want the edited field, its live value and kubectl-patch:\n%s", code, out)
	}
	time.Sleep(2 * time.Second)
	if html := mustKubectl(t, "-n", ns, "get", "configmap", "myweb-html", "-o", `jsonpath={.data.index\.html}`); html != "<h1>edited</h1>" {
		t.Errorf("index.html = %q; Report must leave the edit", html)
	}

	// Deleting a child: it comes back.
	mustKubectl(t, "-n", ns, "delete", "service", "myweb")
	eventually(t, 30*time.Second, "the deleted Service re-created", func() error {
		_, err := kubectl(t, "-n", ns, "get", "service", "myweb")
		return err
	})
}

func mustReadFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
