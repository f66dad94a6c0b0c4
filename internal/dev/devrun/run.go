// Package devrun is what `make run` runs (stencil dev, and hack/run in
// stencil's repository). By default it starts a local control
// plane (and stops it on Ctrl-C), whatever the kubeconfig says, installs the
// CRDs, starts the operator, applies the samples and shows their status,
// then runs until interrupted.
//
// Against a real cluster it runs only when the developer names the
// kubeconfig context (-context, `make run CONTEXT=<name>`), which must be the
// current one. There it joins the deployed operator's leader election (a
// standby until it holds the Lease), paces template changes as the
// deployment does, creates only the CRDs the cluster lacks and applies no
// samples unless asked for (-crds=apply, -samples=true). decide in plan.go
// makes that choice; this file carries it out.
package devrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/stencil-operator/stencil/internal/dev/localcluster"
)

// Folders of the repository that a run installs, relative to its root.
const (
	crdDir = "config/crd/bases"
	// externalCRDDir holds third-party CRDs the kinds use, installed on a
	// local control plane only (a cluster's owner installs them).
	externalCRDDir = "config/crd/external"
	samplesDir     = "config/samples"
)

// Run carries out req: a local control plane (or the named context's
// cluster), the CRDs, the operator, the samples; it runs until ctx ends.
func Run(ctx context.Context, req Request) error {
	bin, err := localcluster.BinDir()
	if err != nil {
		return err
	}
	var kubeconfig *clientcmdapi.Config
	if req.Context != "" {
		if kubeconfig, err = loadKubeconfig(); err != nil {
			return err
		}
	}
	p, err := decide(req, kubeconfig)
	if err != nil {
		return err
	}
	t, stopCluster, err := connect(ctx, bin, p)
	if err != nil {
		return err
	}
	defer stopCluster()
	// Before anything changes: the cluster answers and has the namespace
	// whose Lease the operator is to wait for.
	if p.leaseNamespace != "" {
		if _, err := t.output(ctx, "get", "namespace", p.leaseNamespace, "-o", "name"); err != nil {
			return fmt.Errorf("finding the leader election namespace %s (is stencil deployed there? -lease-namespace names another): %w", p.leaseNamespace, err)
		}
	}
	if err := installCRDs(ctx, t, crdDir, p.crds); err != nil {
		return err
	}
	if p.context == "" {
		if err := installCRDs(ctx, t, externalCRDDir, applyCRDs); err != nil {
			return err
		}
	}
	return runOperator(ctx, t, req, p)
}

// target is the cluster a run talks to: through a kubeconfig and, on a
// cluster the developer named, that context.
type target struct {
	kubectl    string
	kubeconfig string
	context    string
}

// env is the environment of the commands run against t.
func (t target) env() []string {
	return append(os.Environ(), "KUBECONFIG="+t.kubeconfig)
}

func (t target) command(ctx context.Context, args ...string) *exec.Cmd {
	if t.context != "" {
		args = append([]string{"--context=" + t.context}, args...)
	}
	cmd := exec.CommandContext(ctx, t.kubectl, args...)
	cmd.Env = t.env()
	return cmd
}

// run runs kubectl with args, its output ours.
func (t target) run(ctx context.Context, args ...string) error {
	cmd := t.command(ctx, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd.Run()
}

// output runs kubectl with args and returns what it printed.
func (t target) output(ctx context.Context, args ...string) (string, error) {
	cmd := t.command(ctx, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
}

// kubeconfigPath is the developer's kubeconfig, as kubectl finds it.
func kubeconfigPath() string {
	if path := os.Getenv(clientcmd.RecommendedConfigPathEnvVar); path != "" {
		return path
	}
	return clientcmd.RecommendedHomeFile
}

func loadKubeconfig() (*clientcmdapi.Config, error) {
	path := kubeconfigPath()
	rules := &clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(path)}
	kubeconfig, err := rules.Load()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig %s: %w", path, err)
	}
	return kubeconfig, nil
}

// connect returns the target of p: the named context of the developer's
// kubeconfig, or a local control plane started here, and what stops it.
func connect(ctx context.Context, bin string, p plan) (target, func(), error) {
	t := target{kubectl: filepath.Join(bin, "kubectl"), context: p.context}
	if p.context != "" {
		t.kubeconfig = kubeconfigPath()
		fmt.Fprintf(os.Stderr, "Using the cluster of context %s (kubeconfig %s). stencil joins the leader election in %s: it reconciles only while it holds the Lease.\n", p.context, t.kubeconfig, p.leaseNamespace)
		return t, func() {}, nil
	}
	fmt.Fprintln(os.Stderr, "Using a local control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok), whatever the kubeconfig says; to run against a cluster: make run CONTEXT=<kubeconfig context>.")
	start := time.Now()
	cluster, err := localcluster.Start(ctx, localcluster.Options{BinDir: bin})
	if err != nil {
		return target{}, nil, fmt.Errorf("starting the local control plane: %w", err)
	}
	t.kubeconfig = filepath.Join(bin, "local.kubeconfig")
	if err := localcluster.WriteKubeconfig(cluster.Config, t.kubeconfig); err != nil {
		return target{}, nil, errors.Join(err, cluster.Stop())
	}
	fmt.Printf("Local control plane ready in %s at %s; component logs in %s.\n", time.Since(start).Round(time.Second), cluster.Server, cluster.LogDir())
	return t, func() {
		fmt.Println("Stopping the local control plane.")
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the local control plane:", err)
		}
	}, nil
}

// installCRDs installs the CRDs of dir as policy says and waits until the
// API server serves them.
func installCRDs(ctx context.Context, t target, dir string, policy crdPolicy) error {
	if !hasYAML(dir) {
		return nil
	}
	var err error
	switch policy {
	case applyCRDs:
		err = t.run(ctx, "apply", "--server-side", "-f", dir)
	case createMissingCRDs:
		err = createMissing(ctx, t, dir)
	}
	if err != nil {
		return fmt.Errorf("installing CRDs: %w", err)
	}
	if err := t.run(ctx, "wait", "--for=condition=Established", "--timeout=60s", "-f", dir); err != nil {
		return fmt.Errorf("waiting for CRDs: %w", err)
	}
	return nil
}

// createMissing creates each object of dir's files that the cluster lacks,
// and leaves the others as they are.
func createMissing(ctx context.Context, t target, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	for _, file := range files {
		name, err := t.output(ctx, "get", "--ignore-not-found", "-o", "name", "-f", file)
		if err != nil {
			return fmt.Errorf("looking up %s: %w", file, err)
		}
		if name != "" {
			fmt.Fprintf(os.Stderr, "%s is installed; left as it is (make run CRDS=apply applies ours over it).\n", name)
			continue
		}
		if err := t.run(ctx, "create", "-f", file); err != nil {
			return fmt.Errorf("creating %s: %w", file, err)
		}
	}
	return nil
}

// runOperator starts the operator with p's arguments, applies the samples if
// p says so, and runs until ctx ends or the operator exits.
func runOperator(ctx context.Context, t target, req Request, p plan) error {
	operator := exec.Command(req.Operator, p.operatorArgs...)
	operator.Env = t.env()
	operator.Stdout, operator.Stderr = os.Stdout, os.Stderr
	// Its own process group: Ctrl-C reaches only us, and we stop it with one
	// SIGTERM (a second signal would make it exit at once, with status 1).
	operator.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	if err := operator.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", req.Name, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- operator.Wait() }()
	if p.samples && hasYAML(samplesDir) {
		if err := showSamples(ctx, t, samplesDir); err != nil {
			fmt.Fprintln(os.Stderr, "samples:", err)
		}
	}
	printInstructions(t, req.Name)
	select {
	case err := <-exited:
		return fmt.Errorf("stencil exited: %w", err)
	case <-ctx.Done():
		_ = operator.Process.Signal(syscall.SIGTERM)
		if err := <-exited; err != nil {
			fmt.Fprintln(os.Stderr, "stencil stopped:", err)
		}
		return nil
	}
}

// printInstructions tells the developer how to look at what runs.
func printInstructions(t target, name string) {
	kubectl := t.kubectl
	export, edits := "", ""
	if t.context == "" {
		export = "  export KUBECONFIG=" + t.kubeconfig + "\n"
		edits = "Edits of templates/<kind>/ are picked up live: stencil reloads the folder, renders its test cases (as at start-up) and reconciles the kind's resources again (a folder that fails keeps the last good templates; the log says why). A change of Go types (api/, templates/kinds.go) or of a decorator needs Ctrl-C and make run again.\n"
	} else {
		kubectl += " --context=" + t.context
	}
	fmt.Printf("\n%s is running. In another terminal:\n%s  %s get stencil -A\n  curl -s http://127.0.0.1:8080/metrics | grep ^stencil_\n%sPress Ctrl-C to stop.\n", name, export, kubectl, edits)
}

// showSamples applies the samples, gives the operator a moment, and shows
// every stencil resource.
func showSamples(ctx context.Context, t target, dir string) error {
	if err := t.run(ctx, "apply", "--server-side", "-f", dir); err != nil {
		return fmt.Errorf("applying %s: %w", dir, err)
	}
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(5 * time.Second):
	}
	return t.run(ctx, "get", "stencil", "-A", "-o", "wide")
}

func hasYAML(dir string) bool {
	matches, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	return len(matches) > 0
}
