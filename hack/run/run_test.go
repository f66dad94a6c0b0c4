package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/stencil-operator/stencil/internal/dev/localcluster"
)

// These tests drive the hack/run binary, as `make run` does, with a
// kubeconfig whose current context ("production") is a cluster that answers:
// a stand-in for a developer's laptop with access to a cluster where stencil
// is deployed. The operator that hack/run starts is a script that records its
// arguments and environment, so that nothing reconciles; what the tests
// check is what hack/run itself did to that cluster. They name the
// repository's folders and the deployed namespace themselves, and use nothing
// else of package main, so that they run against any version of hack/run.

// TestRunWithoutContextLeavesTheClusterAlone: `make run` without a context
// starts a local control plane and neither installs CRDs nor applies samples
// to the kubeconfig's cluster, nor points the operator at it.
func TestRunWithoutContextLeavesTheClusterAlone(t *testing.T) {
	h := newHarness(t)
	out := h.runUntilRunning(t)
	if crds := h.kubectl(t, "get", "crd", "-o", "name"); crds != "" {
		t.Errorf("hack/run without -context installed CRDs in the kubeconfig's cluster:\n%s\noutput:\n%s", crds, out)
	}
	if env := h.operatorEnv(t); env == "KUBECONFIG="+h.kubeconfig {
		t.Errorf("hack/run without -context ran the operator against the kubeconfig's cluster (%s)\noutput:\n%s", env, out)
	}
}

// TestRunWithContextJoinsLeaderElection: with the context named, hack/run
// runs the operator against it under leader election, creates the one CRD
// the cluster lacks, leaves the deployed ones untouched and applies no
// samples.
func TestRunWithContextJoinsLeaderElection(t *testing.T) {
	h := newHarness(t)
	files, err := filepath.Glob(filepath.Join(h.root, "config/crd/bases", "*.yaml"))
	if err != nil || len(files) < 2 {
		t.Fatalf("CRDs in config/crd/bases: %v %v", files, err)
	}
	h.kubectl(t, "create", "namespace", "stencil-system")
	deployed, missing := files[1:], files[0]
	versions := map[string]string{}
	for _, file := range deployed {
		h.kubectl(t, "create", "-f", file)
		h.kubectl(t, "wait", "--for=condition=Established", "--timeout=60s", "-f", file)
		versions[file] = h.kubectl(t, "get", "-f", file, "-o", "jsonpath={.metadata.resourceVersion}")
	}

	out := h.runUntilRunning(t, "-context=production")

	for _, file := range deployed {
		if v := h.kubectl(t, "get", "-f", file, "-o", "jsonpath={.metadata.resourceVersion}"); v != versions[file] {
			t.Errorf("the deployed CRD of %s changed (resourceVersion %s, was %s)", filepath.Base(file), v, versions[file])
		}
	}
	if name := h.kubectl(t, "get", "--ignore-not-found", "-o", "name", "-f", missing); name == "" {
		t.Errorf("the missing CRD of %s was not created", filepath.Base(missing))
	}
	if samples := h.kubectl(t, "get", "--ignore-not-found", "-o", "name", "-f", filepath.Join(h.root, "config/samples")); samples != "" {
		t.Errorf("samples applied unasked:\n%s", samples)
	}
	args := h.operatorArgs(t)
	for _, want := range []string{"--leader-elect", "--leader-election-namespace=stencil-system"} {
		if !slices.Contains(args, want) {
			t.Errorf("operator arguments %v lack %s\noutput:\n%s", args, want, out)
		}
	}
	if env := h.operatorEnv(t); env != "KUBECONFIG="+h.kubeconfig {
		t.Errorf("operator ran with %s, want the developer's kubeconfig %s", env, h.kubeconfig)
	}
}

// harness is a cluster that answers at the current context of a kubeconfig,
// the hack/run binary, and a folder of binaries whose stencil is a script.
type harness struct {
	root       string // the repository, where hack/run runs
	kubeconfig string
	bin        string
	run        string // the hack/run binary
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	realBin, err := localcluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := localcluster.Start(t.Context(), localcluster.Options{APIServerOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.Stop(); err != nil {
			t.Error(err)
		}
	})
	dir := t.TempDir()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{
		root:       root,
		kubeconfig: filepath.Join(dir, "kubeconfig"),
		bin:        filepath.Join(dir, "bin"),
		run:        filepath.Join(dir, "run"),
	}
	writeKubeconfig(t, cluster.Config, h.kubeconfig)
	fakeBinDir(t, realBin, h.bin)
	build := exec.CommandContext(t.Context(), "go", "build", "-o", h.run, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building hack/run: %v\n%s", err, out)
	}
	return h
}

// writeKubeconfig writes a kubeconfig whose current context, "production",
// is cfg's cluster.
func writeKubeconfig(t *testing.T, cfg *rest.Config, path string) {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["production"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["developer"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["production"] = &clientcmdapi.Context{Cluster: "production", AuthInfo: "developer", Namespace: "default"}
	kc.CurrentContext = "production"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
}

// fakeStencil records its arguments, then its KUBECONFIG, in stencil.args
// beside it, and waits to be stopped.
const fakeStencil = `#!/bin/sh
printf '%s\n' "$@" "KUBECONFIG=$KUBECONFIG" > "$0.args"
exec sleep 3600
`

// fakeBinDir fills dir with links to the binaries of realBin, but for
// stencil, which is fakeStencil.
func fakeBinDir(t *testing.T, realBin, dir string) {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(realBin)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == "stencil" || strings.HasSuffix(e.Name(), ".kubeconfig") {
			continue
		}
		if err := os.Symlink(filepath.Join(realBin, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "stencil"), []byte(fakeStencil), 0o755); err != nil {
		t.Fatal(err)
	}
}

// kubectl runs kubectl against the kubeconfig's cluster and returns its
// output.
func (h *harness) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), filepath.Join(h.bin, "kubectl"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+h.kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// waitForOperator waits until the fake stencil has recorded its arguments.
func (h *harness) waitForOperator(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		data, err := os.ReadFile(filepath.Join(h.bin, "stencil.args"))
		if err == nil && strings.Contains(string(data), "KUBECONFIG=") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the operator did not start within 30s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// operatorArgs is what the fake stencil was started with, its KUBECONFIG
// last.
func (h *harness) operatorArgs(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(h.bin, "stencil.args"))
	if err != nil {
		t.Fatalf("the operator did not start: %v", err)
	}
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

func (h *harness) operatorEnv(t *testing.T) string {
	t.Helper()
	args := h.operatorArgs(t)
	return args[len(args)-1]
}

// runTimeout bounds a run: a local control plane on two busy cores, the
// CRDs, and the samples' five seconds.
const runTimeout = 5 * time.Minute

// runUntilRunning runs hack/run with args from the repository's root, with
// the harness's kubeconfig and binaries, until it says that stencil is
// running; then interrupts it, as Ctrl-C would, and returns what it printed.
func (h *harness) runUntilRunning(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	out := &watchedOutput{want: "stencil is running", seen: make(chan struct{})}
	cmd := exec.CommandContext(ctx, h.run, args...)
	cmd.Dir = h.root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+h.kubeconfig, localcluster.BinDirEnv+"="+h.bin)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = 30 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-out.seen:
	case err := <-exited:
		t.Fatalf("hack/run %v exited before stencil ran: %v\n%s", args, err, out)
	case <-ctx.Done():
		t.Fatalf("hack/run %v: stencil not running after %s\n%s", args, runTimeout, out)
	}
	// The operator starts before that line, but may not have recorded its
	// arguments yet.
	h.waitForOperator(t)
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Errorf("hack/run %v, interrupted: %v\n%s", args, err, out)
	}
	return out.String()
}

// watchedOutput collects a process's output and closes seen once it
// contains want.
type watchedOutput struct {
	want string
	seen chan struct{}
	mu   sync.Mutex
	b    strings.Builder
}

func (o *watchedOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	was := strings.Contains(o.b.String(), o.want)
	o.b.Write(p)
	if !was && strings.Contains(o.b.String(), o.want) {
		close(o.seen)
	}
	return len(p), nil
}

func (o *watchedOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}
