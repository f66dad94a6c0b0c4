// Command run is what `make run` runs: stencil against the cluster of the
// current kubeconfig when one answers, else against a local control plane
// that it starts (and stops on Ctrl-C). It installs the CRDs, starts the
// operator, applies the samples and shows their status, then runs until
// interrupted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/stencil-operator/stencil/internal/localcluster"
)

func main() {
	local := flag.Bool("local", false, "Always start a local control plane, even when a cluster is configured.")
	samples := flag.String("samples", "config/samples", "Folder of custom resources to apply once the operator runs (empty: none).")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *local, *samples); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, forceLocal bool, samples string) error {
	bin, err := localcluster.BinDir()
	if err != nil {
		return err
	}
	kubeconfig, stopCluster, err := chooseCluster(ctx, bin, forceLocal)
	if err != nil {
		return err
	}
	defer stopCluster()
	kubectl := func(args ...string) error {
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		return cmd.Run()
	}
	if hasYAML("config/crd/bases") {
		if err := kubectl("apply", "--server-side", "-f", "config/crd/bases"); err != nil {
			return fmt.Errorf("installing CRDs: %w", err)
		}
		if err := kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", "config/crd/bases"); err != nil {
			return fmt.Errorf("waiting for CRDs: %w", err)
		}
	}
	operator := exec.Command(filepath.Join(bin, "stencil"),
		"--metrics-bind-address=127.0.0.1:8080", "--health-probe-bind-address=127.0.0.1:8081",
		// A template edited on a developer's machine reaches every resource at once.
		"--rollout-batch=0")
	operator.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	operator.Stdout, operator.Stderr = os.Stdout, os.Stderr
	// Its own process group: Ctrl-C reaches only us, and we stop it with one
	// SIGTERM (a second signal would make it exit at once, with status 1).
	operator.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	if err := operator.Start(); err != nil {
		return fmt.Errorf("starting stencil: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- operator.Wait() }()
	if samples != "" && hasYAML(samples) {
		if err := showSamples(ctx, kubectl, samples); err != nil {
			fmt.Fprintln(os.Stderr, "samples:", err)
		}
	}
	fmt.Printf("\nstencil is running. In another terminal:\n  export KUBECONFIG=%s\n  %s get stencil -A\n  curl -s http://127.0.0.1:8080/metrics | grep ^stencil_\nPress Ctrl-C to stop.\n", kubeconfig, filepath.Join(bin, "kubectl"))
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

// chooseCluster returns the kubeconfig of a cluster that answers: the
// configured one, else a local control plane started here.
func chooseCluster(ctx context.Context, bin string, forceLocal bool) (string, func(), error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if !forceLocal {
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
		if err == nil && answers(cfg) {
			path := rules.GetDefaultFilename()
			fmt.Printf("Using the cluster at %s (kubeconfig %s).\n", cfg.Host, path)
			return path, func() {}, nil
		}
		fmt.Println("No cluster answers at the configured kubeconfig; starting a local control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok).")
	}
	start := time.Now()
	cluster, err := localcluster.Start(ctx, localcluster.Options{BinDir: bin})
	if err != nil {
		return "", nil, fmt.Errorf("starting the local control plane: %w", err)
	}
	path := filepath.Join(bin, "local.kubeconfig")
	if err := localcluster.WriteKubeconfig(cluster.Config, path); err != nil {
		return "", nil, errors.Join(err, cluster.Stop())
	}
	fmt.Printf("Local control plane ready in %s at %s; component logs in %s.\n", time.Since(start).Round(time.Second), cluster.Server, cluster.LogDir())
	return path, func() {
		fmt.Println("Stopping the local control plane.")
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the local control plane:", err)
		}
	}, nil
}

func answers(cfg *rest.Config) bool {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = 5 * time.Second
	client, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return false
	}
	_, err = client.ServerVersion()
	return err == nil
}

// showSamples applies the samples, gives the operator a moment, and shows
// every stencil resource.
func showSamples(ctx context.Context, kubectl func(...string) error, dir string) error {
	if err := kubectl("apply", "--server-side", "-f", dir); err != nil {
		return fmt.Errorf("applying %s: %w", dir, err)
	}
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(5 * time.Second):
	}
	return kubectl("get", "stencil", "-A", "-o", "wide")
}

func hasYAML(dir string) bool {
	matches, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	return len(matches) > 0
}
