package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stencil-operator/stencil/internal/kinds"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// registered is the operator's kinds: the project's, set by Execute before
// any command runs (this repository's samples in its own tests).
var registered = kinds.Samples()

// Execute runs the command line of the operator whose kinds are set, and
// returns the process exit code.
func Execute(set kinds.Set) int {
	registered = set
	// The context is cancelled on SIGINT or SIGTERM; a second signal exits.
	err := newRootCommand(set.Name).ExecuteContext(ctrl.SetupSignalHandler())
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

func newRootCommand(name string) *cobra.Command {
	opts := managerOptions{}
	zapOpts := zap.Options{}
	cmd := &cobra.Command{
		Use:   name,
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
			ctrl.SetLogger(log)
			// client-go logs through klog what it does without a context
			// (its informers' failed lists and watches, its warnings): in
			// the same stream and format, at the same level, not in
			// klog's own on stderr.
			klog.SetLoggerWithOptions(log, klog.ContextualLogger(true))
			return runManager(cmd.Context(), opts)
		},
	}
	if strings.HasPrefix(filepath.Base(os.Args[0]), "kubectl-") {
		// Run as a kubectl plugin: help says "kubectl stencil".
		cmd.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl stencil"}
	}
	cmd.AddCommand(newRenderCommand(), newLintCommand(), newTestCommand(), newDiffCommand(), newDriftCommand(), newManifestsCommand(), newInitCommand(), newCreateCommand(), newImportCommand(), newDevCommand(), newVersionCommand())
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
	registered = set
	cmd := newRootCommand(set.Name)
	cmd.SetArgs(args)
	if out != nil {
		cmd.SetOut(out)
		cmd.SetErr(out)
	}
	return cmd.ExecuteContext(ctx)
}
