// Command run is what `make run` runs in stencil's repository: package
// devrun (what a project's `stencil dev` runs too) with bin/stencil and the
// sample decorators on. By default it starts a local control plane
// (stopped on Ctrl-C), whatever the kubeconfig says; -context runs against
// the named cluster instead (go run ./hack/run -h).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/stencil-operator/stencil/internal/dev/devrun"
	"github.com/stencil-operator/stencil/internal/dev/localcluster"
)

// localDecorators are the decorators a local control plane runs: both
// shipped ones, replicaset-podcount as the seed-004 sample
// (config/samples/replicaset-podcount) turns it on, for the namespaces
// labelled stencil.dev/podcount=on (the README's tour labels one). A
// cluster's deployment runs none unless it names them; neither does a run
// against it.
var localDecorators = []string{"--decorators=replicaset-podcount,namespace-defaults", "--decorator-namespace-selector=replicaset-podcount=stencil.dev/podcount=on"}

func main() {
	req := devrun.Request{Name: "stencil", LocalArgs: localDecorators}
	devrun.BindFlags(flag.CommandLine, &req, "stencil-system")
	flag.Parse()
	if err := run(req); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// run runs req with bin/stencil as its operator until it ends or the
// process is interrupted (Ctrl-C or SIGTERM).
func run(req devrun.Request) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	bin, err := localcluster.BinDir()
	if err != nil {
		return err
	}
	req.Operator = filepath.Join(bin, "stencil")
	return devrun.Run(ctx, req)
}
