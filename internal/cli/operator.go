package cli

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/stencil-operator/stencil/internal/operator/kinds"
	"github.com/stencil-operator/stencil/render"
)

// operator is what every command works on: the project's kinds, and the
// cluster --kubeconfig names. Each command line has its own (Run may run
// several in one process).
type operator struct {
	kinds.Set
	// kubeconfig is --kubeconfig: "" follows controller-runtime's order
	// (the KUBECONFIG variable, in-cluster, ~/.kube/config).
	kubeconfig string
}

// bindKubeconfig adds --kubeconfig to the flags of a command that talks to
// a cluster.
func (o *operator) bindKubeconfig(fs *pflag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Path of the kubeconfig file of the cluster to work on (default: $KUBECONFIG, else the in-cluster configuration, else ~/.kube/config).")
}

// restConfig is the client configuration of the cluster the flags name,
// with client-side rate limits off, as controller-runtime's (API priority
// and fairness limits instead).
func (o *operator) restConfig() (*rest.Config, error) {
	if o.kubeconfig == "" {
		cfg, err := ctrl.GetConfig()
		if err != nil {
			return nil, fmt.Errorf("loading kubeconfig: %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", o.kubeconfig, err)
	}
	cfg.QPS = -1
	return cfg, nil
}

// kindsIn loads the project's kinds from their folders under dir (laid
// out as templates/), or the built-in ones when dir is "".
func (o *operator) kindsIn(dir string) ([]*render.Kind, error) {
	if dir == "" {
		return o.Load()
	}
	folders, err := o.Folders(dir)
	if err != nil {
		return nil, err
	}
	var out []*render.Kind
	for _, f := range folders {
		if f.Kind != nil {
			out = append(out, f.Kind)
		}
	}
	return out, nil
}
