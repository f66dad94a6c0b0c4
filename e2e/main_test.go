//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stencil-operator/stencil/internal/dev/localcluster"
	"github.com/stencil-operator/stencil/internal/testing/testutil"
)

var (
	cluster *localcluster.Cluster
	binDir  string
)

func TestMain(m *testing.M) {
	dir, err := localcluster.BinDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	flags, cleanup, err := auditFlags()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := localcluster.RunTests(withCRDs{m}, localcluster.Options{BinDir: binDir, APIServerFlags: flags}, &cluster)
	cleanup()
	os.Exit(code)
}

// auditLog records every request of the operator's ServiceAccounts, so
// that a test can count what one of them sent (see countWrites).
var auditLog string

// auditPolicy: metadata of the operators' requests, nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  users: [system:serviceaccount:stencil-system:stencil, system:serviceaccount:stencil-system:stencil-standby, system:serviceaccount:stencil-system:stencil-shard-default, system:serviceaccount:stencil-system:stencil-shard-a1, system:serviceaccount:stencil-system:stencil-shard-a2, system:serviceaccount:stencil-system:stencil-shard-b]
- level: None
`

func auditFlags() ([]string, func(), error) {
	dir, err := os.MkdirTemp("", "stencil-e2e-audit-")
	if err != nil {
		return nil, nil, err
	}
	policy := filepath.Join(dir, "policy.yaml")
	auditLog = filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, nil, err
	}
	return []string{"--audit-policy-file=" + policy, "--audit-log-path=" + auditLog, "--audit-log-format=json"},
		func() { _ = os.RemoveAll(dir) }, nil
}

// withCRDs installs stencil's CRDs with kubectl, as `make install` does,
// before the tests run.
type withCRDs struct{ m *testing.M }

func (w withCRDs) Run() int {
	for _, args := range [][]string{
		{"apply", "--server-side", "-k", "../config/crd"},
		{"wait", "--for=condition=Established", "--timeout=60s", "-f", "../config/crd/bases"},
	} {
		if out, err := kubectlAdmin(args...); err != nil {
			fmt.Fprintf(os.Stderr, "installing the CRDs: %v\n%s", err, out)
			return 1
		}
	}
	if err := setUpServiceAccount(); err != nil {
		fmt.Fprintln(os.Stderr, "setting up the operator's ServiceAccount:", err)
		return 1
	}
	op, err := startOperator("first")
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the operator:", err)
		return 1
	}
	current = op
	code := w.m.Run()
	if code != 0 {
		printLogs()
	}
	for _, o := range running {
		o.stop()
	}
	return code
}

// printLogs writes the end of every operator's log, oldest first: the
// operator that failed a test is often not the last one started (a test's
// cleanup starts the next one, whose log then ends a second after its
// start), and a test that failed on a slow operator needs its log, not its
// successor's.
func printLogs() {
	for _, o := range running {
		state := "running"
		select {
		case <-o.exited:
			state = "exited"
		default:
		}
		_, _ = fmt.Fprintf(os.Stderr, "--- operator %s (started %s, %s ago, %s) log, last 4000 bytes:\n%s\n",
			o.name, o.started.Format("15:04:05.000"), time.Since(o.started).Round(time.Millisecond), state, o.logTail())
	}
}

// current is the operator expected to lead; running lists every operator
// started, to stop at the end.
var (
	current *operator
	running []*operator
)

func tailBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// kubectl runs bin/kubectl as cluster admin and returns its standard output.
func kubectl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "kubectl"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// mustKubectl is kubectl that fails the test on error.
func mustKubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := kubectl(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// eventually polls check until it returns nil, failing the test after within.
var eventually = testutil.Eventually
