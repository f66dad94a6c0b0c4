package devrun

import (
	"os"
	"slices"
	"strings"
	"testing"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// kubeconfigWith has the contexts names, the first one current.
func kubeconfigWith(names ...string) *clientcmdapi.Config {
	kc := clientcmdapi.NewConfig()
	for _, name := range names {
		kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	if len(names) > 0 {
		kc.CurrentContext = names[0]
	}
	return kc
}

// deployedNamespace is where stencil's config/manager deploys it.
const deployedNamespace = "stencil-system"

// sampleDecorators are the flags hack/run adds on a local control plane.
var sampleDecorators = []string{"--decorators=replicaset-podcount,namespace-defaults", "--decorator-namespace-selector=replicaset-podcount=stencil.dev/podcount=on"}

var (
	localArgs   = []string{"--metrics-bind-address=127.0.0.1:8080", "--health-probe-bind-address=127.0.0.1:8081", "--webhook-url=https://127.0.0.1:9443/convert", "--rollout-batch=0", "--decorators=replicaset-podcount,namespace-defaults", "--decorator-namespace-selector=replicaset-podcount=stencil.dev/podcount=on", "--templates=templates", "--reload-templates"}
	clusterArgs = []string{"--metrics-bind-address=127.0.0.1:8080", "--health-probe-bind-address=127.0.0.1:8081", "--leader-elect", "--leader-election-namespace=stencil-system", "--rollout-batch=10", "--rollout-deadline=10m"}
)

func TestDecide(t *testing.T) {
	prod := kubeconfigWith("prod", "staging")
	tests := []struct {
		name       string
		req        Request
		kubeconfig *clientcmdapi.Config
		want       plan
		wantErr    string
	}{{
		name:       "no context: local, whatever the kubeconfig's current context",
		req:        Request{LeaseNamespace: "stencil-system", LocalArgs: sampleDecorators},
		kubeconfig: prod,
		want:       plan{crds: applyCRDs, samples: true, operatorArgs: localArgs},
	}, {
		name: "no context, no kubeconfig",
		req:  Request{LocalArgs: sampleDecorators},
		want: plan{crds: applyCRDs, samples: true, operatorArgs: localArgs},
	}, {
		name: "local without samples",
		req:  Request{Samples: "false", LocalArgs: sampleDecorators},
		want: plan{crds: applyCRDs, samples: false, operatorArgs: localArgs},
	}, {
		name:       "the current context, named: leader election, the CRDs it lacks, no samples",
		req:        Request{Context: "prod", LeaseNamespace: "stencil-system"},
		kubeconfig: prod,
		want:       plan{context: "prod", crds: createMissingCRDs, samples: false, leaseNamespace: "stencil-system", operatorArgs: clusterArgs},
	}, {
		name:       "a cluster, samples and CRDs asked for",
		req:        Request{Context: "prod", Samples: "1", CRDs: "apply", LeaseNamespace: "stencil-system"},
		kubeconfig: prod,
		want:       plan{context: "prod", crds: applyCRDs, samples: true, leaseNamespace: "stencil-system", operatorArgs: clusterArgs},
	}, {
		name:       "a context that is not the current one",
		req:        Request{Context: "staging", LeaseNamespace: "stencil-system"},
		kubeconfig: prod,
		wantErr:    `context "staging" is not the current context ("prod")`,
	}, {
		name:       "a context the kubeconfig lacks",
		req:        Request{Context: "prd", LeaseNamespace: "stencil-system"},
		kubeconfig: prod,
		wantErr:    `context "prd" is not in the kubeconfig (contexts: prod, staging)`,
	}, {
		name:    "a context, no kubeconfig",
		req:     Request{Context: "prod", LeaseNamespace: "stencil-system"},
		wantErr: `context "prod" is not in the kubeconfig (contexts: none)`,
	}, {
		name:       "a cluster without a lease namespace",
		req:        Request{Context: "prod"},
		kubeconfig: prod,
		wantErr:    "-lease-namespace is empty",
	}, {
		name:       "samples not a boolean",
		req:        Request{Context: "prod", Samples: "maybe", LeaseNamespace: "stencil-system"},
		kubeconfig: prod,
		wantErr:    "-samples is true, false or empty",
	}, {
		name:    "crds neither apply nor empty",
		req:     Request{CRDs: "replace"},
		wantErr: `-crds is "apply" or empty, not "replace"`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decide(tt.req, tt.kubeconfig)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.context != tt.want.context || got.crds != tt.want.crds || got.samples != tt.want.samples || got.leaseNamespace != tt.want.leaseNamespace || !slices.Equal(got.operatorArgs, tt.want.operatorArgs) {
				t.Errorf("plan\n  %+v\nwant\n  %+v", got, tt.want)
			}
		})
	}
}

// TestClusterRunsAsDeployed: on a cluster, the operator elects a leader and
// paces rollouts exactly as config/manager/manager.yaml's, and is given no
// flag (such as a decorator's) that the deployment is not.
func TestClusterRunsAsDeployed(t *testing.T) {
	data, err := os.ReadFile("../../../config/manager/manager.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var deployed []string
	for line := range strings.Lines(string(data)) {
		if arg, ok := strings.CutPrefix(strings.TrimSpace(line), "- --"); ok {
			deployed = append(deployed, "--"+arg)
		}
	}
	if !strings.Contains(string(data), "\n  namespace: "+deployedNamespace+"\n") {
		t.Errorf("the deployment is not in %s, the default -lease-namespace", deployedNamespace)
	}
	p, err := decide(Request{Context: "prod", LeaseNamespace: deployedNamespace}, kubeconfigWith("prod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, arg := range deployed {
		if strings.HasPrefix(arg, "--leader-elect") || strings.HasPrefix(arg, "--rollout-") {
			if !slices.Contains(p.operatorArgs, arg) {
				t.Errorf("the deployment runs with %s, a run against a cluster does not: %v", arg, p.operatorArgs)
			}
		}
	}
	// What a run adds: its endpoints on this machine, and the Lease's
	// namespace that a pod would know as its own.
	for _, arg := range p.operatorArgs {
		local := slices.Contains(localEndpoints, arg) || strings.HasPrefix(arg, "--leader-election-namespace=")
		if !local && !slices.Contains(deployed, arg) {
			t.Errorf("a run against a cluster adds %s, which the deployment does not run with (%v)", arg, deployed)
		}
	}
}
