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

// TestTemplatesReloadWhileRunning: stencil run with --templates on a copy
// of templates/ and --reload-templates picks up an edit of a kind's
// template within seconds, without a restart. An edit that no longer
// parses, and one that fails a test case, keep the last good templates and
// say why in the log: the resource's objects are still rendered with the
// last good ones (a spec change shows it). A fixed edit says it recovered.
func TestTemplatesReloadWhileRunning(t *testing.T) {
	const ns = "reload"
	dir := filepath.Join(t.TempDir(), "templates")
	if err := os.CopyFS(dir, os.DirFS("../templates")); err != nil {
		t.Fatal(err)
	}
	useOperator(t, "reload", "--templates="+dir, "--reload-templates")
	t.Cleanup(func() { restoreOperator(t, "after-reload") })
	op := current
	t.Cleanup(func() {
		if strings.Contains(readLog(t, op), "DATA RACE") { // a stencil built with -race
			t.Errorf("the race detector found a race:\n%s", op.logTail())
		}
		if t.Failed() {
			t.Logf("operator %s log, its template and error lines:\n%s", op.name, grepLog(t, op, `templates`, `"level":"error"`))
		}
	})
	mustKubectl(t, "create", "namespace", ns)
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "namespace", ns, "--wait=false") })
	mustKubectl(t, "-n", ns, "apply", "--server-side", "-f", "../config/samples/flightticket.yaml")
	waitReady(t, ns, "flightticket/my-flight-ticket")

	template, declaration := filepath.Join(dir, "flightticket", "configmap.yaml"), filepath.Join(dir, "flightticket", "_kind.yaml")
	good, err := os.ReadFile(template)
	if err != nil {
		t.Fatal(err)
	}
	declared, err := os.ReadFile(declaration)
	if err != nil {
		t.Fatal(err)
	}
	write := func(file, content string) int {
		t.Helper()
		logged := len(readLog(t, op))
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return logged
	}
	edit := func(content string) int { t.Helper(); return write(template, content) }
	withData := func(key, value string) string {
		return strings.Replace(string(good), "\ndata:\n", "\ndata:\n  "+key+": "+value+"\n", 1)
	}
	configMapData := func(key, want string) func() error {
		return func() error {
			got, err := kubectl(t, "-n", ns, "get", "configmap", "my-flight-ticket-booking", "-o", "jsonpath={.data."+key+"}")
			if err != nil {
				return err
			}
			if got != want {
				return fmt.Errorf("data.%s is %q, want %q", key, got, want)
			}
			return nil
		}
	}

	// An edit reaches the resource's objects, without a restart.
	start := time.Now()
	edit(withData("reloaded", `"first"`))
	eventually(t, 30*time.Second, "the edited template applied", configMapData("reloaded", "first"))
	t.Logf("an edited template reached the ConfigMap %s after it was saved", time.Since(start).Round(time.Millisecond))

	// Broken edits keep the last good templates and say why.
	for _, broken := range []struct {
		name string
		// file is the file edited, content what is written in it.
		file    string
		content string
		// says is what the error log line holds.
		says string
		// number is the spec change made after it, which the last good
		// templates render.
		number int
	}{
		{"owns a type it did not: a restart", declaration, string(declared) + "- {apiVersion: v1, kind: Secret}\n", "restart stencil", 5},
		{"does not parse", template, withData("reloaded", `{{ .Spec.From `), "parsing template: configmap.yaml:", 3},
		{"fails a test case", template, withData("reloaded", `"second"`) + "  broken: [unclosed\n", "cannot render its test case", 4},
	} {
		t.Run(broken.name, func(t *testing.T) {
			from := write(broken.file, broken.content)
			if broken.file == declaration {
				defer write(declaration, string(declared))
			}
			eventually(t, 30*time.Second, "the refusal in the log", func() error {
				return logLine(t, op, from, "Keeping the last good templates", broken.says)
			})
			// The resource still renders with the last good templates.
			mustKubectl(t, "-n", ns, "patch", "flightticket", "my-flight-ticket", "--type=merge", "-p", `{"spec":{"number":`+fmt.Sprint(broken.number)+`}}`)
			eventually(t, 30*time.Second, "the spec change applied", configMapData("number", fmt.Sprint(broken.number)))
			if err := configMapData("reloaded", "first")(); err != nil {
				t.Error(err)
			}
		})
	}

	// Fixed, it says so and applies.
	from := edit(withData("reloaded", `"fixed"`))
	eventually(t, 30*time.Second, "the fixed template applied", configMapData("reloaded", "fixed"))
	if err := logLine(t, op, from, "The templates load again", "flightticket"); err != nil {
		t.Error(err)
	}
}

func readLog(t *testing.T, op *operator) string {
	t.Helper()
	data, err := os.ReadFile(op.logPath)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// logLine finds, in op's log after its first from bytes, a line that
// holds every one of parts.
func logLine(t *testing.T, op *operator, from int, parts ...string) error {
	t.Helper()
	for line := range strings.SplitSeq(readLog(t, op)[from:], "\n") {
		found := true
		for _, p := range parts {
			found = found && strings.Contains(line, p)
		}
		if found {
			return nil
		}
	}
	return fmt.Errorf("no log line with %q", parts)
}

// grepLog is the lines of op's log that hold any of parts.
func grepLog(t *testing.T, op *operator, parts ...string) string {
	t.Helper()
	var out []string
	for line := range strings.SplitSeq(readLog(t, op), "\n") {
		for _, p := range parts {
			if strings.Contains(line, p) {
				out = append(out, line)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
