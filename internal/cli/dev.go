package cli

import (
	"flag"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/stencil-operator/stencil/internal/dev/devrun"
)

func newDevCommand(project *operator) *cobra.Command {
	req := devrun.Request{}
	cmd := &cobra.Command{
		Use:   "dev [-- OPERATOR FLAGS]",
		Short: "Run the operator while you develop it: a local control plane, the CRDs, the samples, and templates that reload as you edit them",
		Long: `dev is what ` + "`make run`" + ` runs in a project. It starts a local control plane
(etcd, kube-apiserver, the controllers and fake kwok nodes, from bin/: make
tools), whatever the kubeconfig says, installs config/crd/bases and
config/crd/external, runs this operator with the templates read from
templates/ (an edit is picked up within a second, with no restart), applies
config/samples and shows them, and runs until Ctrl-C, which stops the
control plane too. A change of Go types needs Ctrl-C and make run again.

With --context it runs against that kubeconfig context instead (which must
be the current one), joining the deployed operator's leader election.

Flags after -- go to the operator, over dev's own choice (e.g. -- --metrics-bind-address=0).`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 0 && len(args) > 0 {
				return fmt.Errorf("unexpected %q: operator flags go after --", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			req.OperatorArgs = args
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			req.Operator, req.Name = exe, project.Name
			return devrun.Run(cmd.Context(), req)
		},
	}
	// devrun's flags are Go flags; cobra takes them through pflag.
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	devrun.BindFlags(fs, &req, project.Name+"-system")
	cmd.Flags().AddGoFlagSet(fs)
	return cmd
}
