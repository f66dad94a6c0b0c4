//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// widgetTemplate is the object of a type whose CRD the test installs late
// (testdata/widget-crd.yaml) that the FlightTicket kind renders besides its
// ConfigMap, in a copy of templates/.
const widgetTemplate = `apiVersion: e2e.stencil.dev/v1
kind: Widget
metadata:
  name: {{ printf "%s-widget" .Name | quote }}
spec:
  size: {{ .Spec.Number | quote }}
`

// TestMissingCRDStopsOneKind: a kind that owns a type the cluster does not
// serve (its CRD is not installed) has its resources Stalled, reason
// TypeNotServed, the type named, while the other kinds' resources become
// Ready; once the CRD is installed, the same operator process, without a
// restart, applies the kind's objects and its resource becomes Ready.
//
// The operator runs, as the suite's does, as its ServiceAccount with the
// generated ClusterRole, plus what the generated one would grant for an
// owned Widget (testdata/widget-rbac.yaml): the built-in kinds own none.
func TestMissingCRDStopsOneKind(t *testing.T) {
	const ns = "notserved"
	dir := filepath.Join(t.TempDir(), "templates")
	if err := os.CopyFS(dir, os.DirFS("../templates")); err != nil {
		t.Fatal(err)
	}
	kind := filepath.Join(dir, "flightticket")
	declared, err := os.ReadFile(filepath.Join(kind, "_kind.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for file, content := range map[string]string{
		"_kind.yaml":  string(declared) + "- {apiVersion: e2e.stencil.dev/v1, kind: Widget}\n",
		"widget.yaml": widgetTemplate,
	} {
		if err := os.WriteFile(filepath.Join(kind, file), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Its test cases expect the ConfigMap alone.
	if err := os.RemoveAll(filepath.Join(kind, "tests")); err != nil {
		t.Fatal(err)
	}
	if out, _ := kubectl(t, "get", "crd", "widgets.e2e.stencil.dev", "--ignore-not-found", "-o", "name"); out != "" {
		t.Fatalf("the Widget CRD is installed already: %s", out)
	}
	mustKubectl(t, "apply", "--server-side", "-f", "testdata/widget-rbac.yaml")
	t.Cleanup(func() {
		_, _ = kubectl(t, "delete", "--ignore-not-found", "-f", "testdata/widget-crd.yaml", "-f", "testdata/widget-rbac.yaml")
	})

	useOperator(t, "notserved", "--templates="+dir)
	t.Cleanup(func() { restoreOperator(t, "after-notserved") })
	op := current
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("operator %s log, its type and error lines:\n%s", op.name, grepLog(t, op, `Widget`, `"level":"error"`))
		}
	})
	mustKubectl(t, "create", "namespace", ns)
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "namespace", ns, "--wait=false") })
	mustKubectl(t, "-n", ns, "apply", "--server-side", "-f", "../config/samples/flightticket.yaml", "-f", "../config/samples/foo.yaml")

	// The other kinds run; FlightTicket says which type it waits for.
	waitReady(t, ns, "foo/example-foo")
	eventually(t, 30*time.Second, "the FlightTicket Stalled for the Widget type", func() error {
		out, err := kubectl(t, "-n", ns, "get", "flightticket", "my-flight-ticket", "-o",
			`jsonpath={range .status.conditions[?(@.type=="Stalled")]}{.status} {.reason} {.message}{end}`)
		if err != nil {
			return err
		}
		if !strings.HasPrefix(out, "True TypeNotServed ") || !strings.Contains(out, "e2e.stencil.dev/v1/Widget") {
			return fmt.Errorf("Stalled condition %q", out)
		}
		return nil
	})
	if out := mustKubectl(t, "-n", ns, "get", "configmaps", "-o", "name"); strings.Contains(out, "my-flight-ticket-booking") {
		t.Errorf("a kind waiting for a type applied its objects: %s", out)
	}

	// Installed, the CRD starts the kind in the same process.
	from := len(readLog(t, op))
	mustKubectl(t, "apply", "--server-side", "-f", "testdata/widget-crd.yaml")
	mustKubectl(t, "wait", "--for=condition=Established", "--timeout=30s", "crd/widgets.e2e.stencil.dev")
	start := time.Now()
	waitReady(t, ns, "flightticket/my-flight-ticket")
	t.Logf("the FlightTicket was Ready %s after its type's CRD was established", time.Since(start).Round(time.Millisecond))
	if got := mustKubectl(t, "-n", ns, "get", "widget", "my-flight-ticket-widget", "-o", "jsonpath={.spec.size}"); got == "" {
		t.Error("the Widget has no spec.size")
	}
	select {
	case <-op.exited:
		t.Fatalf("operator %s (pid %d) exited: the kind was started by a restart", op.name, op.cmd.Process.Pid)
	default:
	}
	if op != current {
		t.Fatalf("the operator was replaced")
	}
	if err := logLine(t, op, from, "The cluster now serves a type the kind needs", "e2e.stencil.dev/v1/Widget"); err != nil {
		t.Error(err)
	}
}
