package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"

	"github.com/stencil-operator/stencil/internal/operator/kinds"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// Execute runs the command line of the operator whose kinds are set, and
// returns the process exit code.
func Execute(set kinds.Set) int {
	// The context is cancelled on SIGINT or SIGTERM; a second signal exits.
	ctx, stop := signalContext()
	defer stop()
	err := newRootCommand(set).ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	if errors.Is(err, errDifferent) {
		return 1 // the diff said it all, as kubectl diff does
	}
	fmt.Fprintln(os.Stderr, "Error:", err)
	if exit, ok := errors.AsType[*exitError](err); ok {
		return exit.code
	}
	return 1
}

// signalContext is cancelled on the first SIGINT or SIGTERM; a second
// exits. Unlike controller-runtime's SetupSignalHandler, it may be set up
// more than once in a process (Execute called again), and stop undoes it.
func signalContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-signals:
		case <-ctx.Done():
			return
		}
		cancel()
		select {
		case <-signals:
			os.Exit(1)
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(signals)
		cancel()
	}
}

// processLogger is set once per process, by the first operator run.
var processLogger sync.Once

// setProcessLogger makes log, the first time only, the logger of what
// logs without a logger of its own: controller-runtime's global one and
// client-go's (klog: its informers' failed lists and watches, its
// warnings), in the same stream and format, at the same level, not in
// klog's own on stderr. An operator's own logs (its manager's, its
// reconcilers') go to its own log, so that several operators run in one
// process (tests) each log with their flags.
func setProcessLogger(log logr.Logger) {
	processLogger.Do(func() {
		ctrl.SetLogger(log)
		klog.SetLoggerWithOptions(log, klog.ContextualLogger(true))
	})
}

func newRootCommand(set kinds.Set) *cobra.Command {
	op := &operator{Set: set}
	opts := managerOptions{project: op}
	zapOpts := zap.Options{}
	cmd := &cobra.Command{
		Use:   set.Name,
		Short: "A Kubernetes operator whose resource logic lives in templates",
		Long: `stencil renders each custom resource's spec through embedded Go templates,
server-side-applies the result, prunes orphans by label and reports drift in
the resource's status.

Run without a subcommand, it runs the operator against the cluster of the
current kubeconfig (or in-cluster configuration).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := zap.New(zap.UseFlagOptions(&zapOpts))
			setProcessLogger(log)
			return runManager(cmd.Context(), opts, log)
		},
	}
	if strings.HasPrefix(filepath.Base(os.Args[0]), "kubectl-") {
		// Run as a kubectl plugin: help says "kubectl stencil".
		cmd.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl stencil"}
	}
	cmd.AddCommand(newRenderCommand(op), newLintCommand(op), newTestCommand(op), newDiffCommand(op), newDriftCommand(op), newManifestsCommand(op), newInitCommand(), newCreateCommand(), newImportCommand(), newDevCommand(op), newVersionCommand())
	op.bindKubeconfig(cmd.Flags())
	opts.bindFlags(cmd.Flags())
	goFlags := flag.NewFlagSet("zap", flag.ContinueOnError)
	zapOpts.BindFlags(goFlags)
	cmd.Flags().AddGoFlagSet(goFlags)
	return cmd
}

// Run runs the command line args of the operator whose kinds are set, in
// this process, until ctx ends (the operator) or the command is done: what
// package stenciltest runs a project's operator with.
func Run(ctx context.Context, set kinds.Set, args []string, out io.Writer) error {
	cmd := newRootCommand(set)
	cmd.SetArgs(args)
	if out != nil {
		cmd.SetOut(out)
		cmd.SetErr(out)
	}
	return cmd.ExecuteContext(ctx)
}
