package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// Execute runs the command line and returns the process exit code.
func Execute() int {
	// The context is cancelled on SIGINT or SIGTERM; a second signal exits.
	err := newRootCommand().ExecuteContext(ctrl.SetupSignalHandler())
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

func newRootCommand() *cobra.Command {
	opts := managerOptions{}
	zapOpts := zap.Options{}
	cmd := &cobra.Command{
		Use:   "stencil",
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
			ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
			return runManager(cmd.Context(), opts)
		},
	}
	if strings.HasPrefix(filepath.Base(os.Args[0]), "kubectl-") {
		// Run as a kubectl plugin: help says "kubectl stencil".
		cmd.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl stencil"}
	}
	cmd.AddCommand(newRenderCommand(), newLintCommand(), newTestCommand(), newDiffCommand(), newDriftCommand())
	opts.bindFlags(cmd.Flags())
	goFlags := flag.NewFlagSet("zap", flag.ContinueOnError)
	zapOpts.BindFlags(goFlags)
	cmd.Flags().AddGoFlagSet(goFlags)
	return cmd
}
