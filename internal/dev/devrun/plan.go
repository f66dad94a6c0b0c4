package devrun

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Request is what the developer asked for on the command line of `make
// run` (stencil dev, hack/run).
type Request struct {
	// Operator is the path of the operator's binary to run.
	Operator string
	// Name is the operator's, as its messages name it.
	Name string
	// LocalArgs are more operator flags on a local control plane (this
	// repository's decorators).
	LocalArgs []string
	// OperatorArgs are more operator flags, last: the developer's, which
	// win over the plan's.
	OperatorArgs []string
	// Context names the kubeconfig context to run against. Empty: a local
	// control plane, whatever the kubeconfig says.
	Context string
	// Samples is empty (the default: yes on a local control plane, no on a
	// cluster) or a boolean: whether to apply config/samples.
	Samples string
	// CRDs is empty (the default) or "apply": server-side-apply
	// config/crd/bases over the CRDs a cluster already has.
	CRDs string
	// LeaseNamespace holds the deployed operator's leader election Lease,
	// which a run against a cluster joins.
	LeaseNamespace string
}

// crdPolicy is how a run installs config/crd/bases.
type crdPolicy int

const (
	// applyCRDs server-side-applies every CRD, over what the cluster has.
	applyCRDs crdPolicy = iota
	// createMissingCRDs creates the CRDs the cluster lacks and leaves the
	// others as they are: they belong to the deployed operator.
	createMissingCRDs
)

// plan is what a run does.
type plan struct {
	// context is the kubeconfig context to run against; empty: a local
	// control plane that the run starts and stops.
	context string
	crds    crdPolicy
	samples bool
	// leaseNamespace is where the operator elects a leader; empty: it does
	// not.
	leaseNamespace string
	operatorArgs   []string
}

// Addresses of the operator's endpoints, on this machine only.
var localEndpoints = []string{"--metrics-bind-address=127.0.0.1:8080", "--health-probe-bind-address=127.0.0.1:8081"}

// localWebhook: the local control plane reaches the conversion webhook of
// kinds with several versions on this machine (stencil points their CRDs
// at it).
var localWebhook = []string{"--webhook-url=https://127.0.0.1:9443/convert"}

// deployedRollout is config/manager/manager.yaml's pacing: on a cluster a
// template edited on a developer's machine reaches resources as a new
// stencil version would, a batch at a time.
var deployedRollout = []string{"--rollout-batch=10", "--rollout-deadline=10m"}

// localTemplates: on a local control plane stencil reads templates/ from
// disk and picks up an edit of a kind's folder while it runs, without a
// restart that would lose the cluster (a change of Go types still needs
// one). A cluster's run renders with the built-in templates, as the
// deployment does. The pacing is off (--rollout-batch=0): an edit reaches
// every resource at once.
var localTemplates = []string{"--templates=templates", "--reload-templates"}

// decide turns a Request into a plan. kubeconfig is the developer's
// kubeconfig; it is read only when the Request names a context, and may be
// nil otherwise.
func decide(req Request, kubeconfig *clientcmdapi.Config) (plan, error) {
	if req.Context == "" {
		return localPlan(req)
	}
	return clusterPlan(req, kubeconfig)
}

// localPlan runs on a disposable local control plane: CRDs applied, samples
// applied, one operator without leader election, the decorators on, and a
// template edited on the developer's machine reaching every resource at
// once.
func localPlan(req Request) (plan, error) {
	if req.CRDs != "" && req.CRDs != "apply" {
		return plan{}, fmt.Errorf(`-crds is "apply" or empty, not %q`, req.CRDs)
	}
	samples, err := parseSamples(req.Samples, true)
	if err != nil {
		return plan{}, err
	}
	return plan{
		crds:         applyCRDs,
		samples:      samples,
		operatorArgs: slices.Concat(localEndpoints, localWebhook, []string{"--rollout-batch=0"}, req.LocalArgs, localTemplates, req.OperatorArgs),
	}, nil
}

// clusterPlan runs against the cluster that the developer named: only if the
// name is the kubeconfig's current context (what kubectl in another terminal
// talks to), with the deployed operator's leader election and pacing, its
// CRDs left as they are and no samples unless asked for.
func clusterPlan(req Request, kubeconfig *clientcmdapi.Config) (plan, error) {
	if err := checkContext(req.Context, kubeconfig); err != nil {
		return plan{}, err
	}
	if req.LeaseNamespace == "" {
		return plan{}, errors.New("-lease-namespace is empty: on a cluster stencil joins the deployed operator's leader election")
	}
	crds := createMissingCRDs
	switch req.CRDs {
	case "":
	case "apply":
		crds = applyCRDs
	default:
		return plan{}, fmt.Errorf(`-crds is "apply" or empty, not %q`, req.CRDs)
	}
	samples, err := parseSamples(req.Samples, false)
	if err != nil {
		return plan{}, err
	}
	args := slices.Concat(localEndpoints,
		[]string{"--leader-elect", "--leader-election-namespace=" + req.LeaseNamespace},
		deployedRollout, req.OperatorArgs)
	return plan{
		context:        req.Context,
		crds:           crds,
		samples:        samples,
		leaseNamespace: req.LeaseNamespace,
		operatorArgs:   args,
	}, nil
}

// checkContext returns an error unless name is a context of kubeconfig and
// its current one.
func checkContext(name string, kubeconfig *clientcmdapi.Config) error {
	if kubeconfig == nil || kubeconfig.Contexts[name] == nil {
		return fmt.Errorf("context %q is not in the kubeconfig (contexts: %s)", name, contextNames(kubeconfig))
	}
	if kubeconfig.CurrentContext != name {
		return fmt.Errorf("context %q is not the current context (%q): switch with `kubectl config use-context %s`, then run again", name, kubeconfig.CurrentContext, name)
	}
	return nil
}

func contextNames(kubeconfig *clientcmdapi.Config) string {
	if kubeconfig == nil || len(kubeconfig.Contexts) == 0 {
		return "none"
	}
	names := make([]string, 0, len(kubeconfig.Contexts))
	for name := range kubeconfig.Contexts {
		names = append(names, name)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// parseSamples reads -samples: empty means def.
func parseSamples(value string, def bool) (bool, error) {
	if value == "" {
		return def, nil
	}
	samples, err := strconv.ParseBool(value)
	if err != nil {
		return false, fmt.Errorf("-samples is true, false or empty: %w", err)
	}
	return samples, nil
}

// BindFlags binds req's fields to flags of fs; leaseNamespace is where
// the operator is deployed (<name>-system).
func BindFlags(fs *flag.FlagSet, req *Request, leaseNamespace string) {
	fs.StringVar(&req.Context, "context", "", "Run against the cluster of this kubeconfig context, which must be the current one: naming it is the confirmation. Empty: a local control plane, whatever the kubeconfig says.")
	fs.StringVar(&req.Samples, "samples", "", "Apply config/samples: true or false (default: true on a local control plane, false on a cluster).")
	fs.StringVar(&req.CRDs, "crds", "", `On a cluster, "apply" server-side-applies config/crd/bases over the CRDs it has (default: create only the missing ones). A local control plane always gets them.`)
	fs.StringVar(&req.LeaseNamespace, "lease-namespace", leaseNamespace, "On a cluster: the namespace of the deployed operator's leader election Lease, which this run joins.")
}
