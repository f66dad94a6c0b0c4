package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// request is what the developer asked for on hack/run's command line.
type request struct {
	// context names the kubeconfig context to run against. Empty: a local
	// control plane, whatever the kubeconfig says.
	context string
	// samples is empty (the default: yes on a local control plane, no on a
	// cluster) or a boolean: whether to apply config/samples.
	samples string
	// crds is empty (the default) or "apply": server-side-apply
	// config/crd/bases over the CRDs a cluster already has.
	crds string
	// leaseNamespace holds the deployed operator's leader election Lease,
	// which a run against a cluster joins.
	leaseNamespace string
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

// deployedNamespace is where config/manager/manager.yaml deploys the
// operator, and so where its leader election Lease is.
const deployedNamespace = "stencil-system"

// Addresses of the operator's endpoints, on this machine only.
var localEndpoints = []string{"--metrics-bind-address=127.0.0.1:8080", "--health-probe-bind-address=127.0.0.1:8081"}

// deployedRollout is config/manager/manager.yaml's pacing: on a cluster a
// template edited on a developer's machine reaches resources as a new
// stencil version would, a batch at a time.
var deployedRollout = []string{"--rollout-batch=10", "--rollout-deadline=10m"}

// localDecorators are the decorators a local control plane runs: both
// shipped ones, replicaset-podcount as the seed-004 sample
// (config/samples/replicaset-podcount) turns it on, for the namespaces
// labelled stencil.dev/podcount=on (the README's tour labels one). A
// cluster's deployment runs none unless it names them; neither does a run
// against it.
var localDecorators = []string{"--decorators=replicaset-podcount,namespace-defaults", "--decorator-namespace-selector=replicaset-podcount=stencil.dev/podcount=on"}

// decide turns a request into a plan. kubeconfig is the developer's
// kubeconfig; it is read only when the request names a context, and may be
// nil otherwise.
func decide(req request, kubeconfig *clientcmdapi.Config) (plan, error) {
	if req.context == "" {
		return localPlan(req)
	}
	return clusterPlan(req, kubeconfig)
}

// localPlan runs on a disposable local control plane: CRDs applied, samples
// applied, one operator without leader election, the decorators on, and a
// template edited on the developer's machine reaching every resource at
// once.
func localPlan(req request) (plan, error) {
	if req.crds != "" && req.crds != "apply" {
		return plan{}, fmt.Errorf(`-crds is "apply" or empty, not %q`, req.crds)
	}
	samples, err := parseSamples(req.samples, true)
	if err != nil {
		return plan{}, err
	}
	return plan{
		crds:         applyCRDs,
		samples:      samples,
		operatorArgs: slices.Concat(localEndpoints, []string{"--rollout-batch=0"}, localDecorators),
	}, nil
}

// clusterPlan runs against the cluster that the developer named: only if the
// name is the kubeconfig's current context (what kubectl in another terminal
// talks to), with the deployed operator's leader election and pacing, its
// CRDs left as they are and no samples unless asked for.
func clusterPlan(req request, kubeconfig *clientcmdapi.Config) (plan, error) {
	if err := checkContext(req.context, kubeconfig); err != nil {
		return plan{}, err
	}
	if req.leaseNamespace == "" {
		return plan{}, errors.New("-lease-namespace is empty: on a cluster stencil joins the deployed operator's leader election")
	}
	crds := createMissingCRDs
	switch req.crds {
	case "":
	case "apply":
		crds = applyCRDs
	default:
		return plan{}, fmt.Errorf(`-crds is "apply" or empty, not %q`, req.crds)
	}
	samples, err := parseSamples(req.samples, false)
	if err != nil {
		return plan{}, err
	}
	args := slices.Concat(localEndpoints,
		[]string{"--leader-elect", "--leader-election-namespace=" + req.leaseNamespace},
		deployedRollout)
	return plan{
		context:        req.context,
		crds:           crds,
		samples:        samples,
		leaseNamespace: req.leaseNamespace,
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
