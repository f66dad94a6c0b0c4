package cli

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/stencil-operator/stencil/internal/testing/testkind"
	"github.com/stencil-operator/stencil/reconciler"
	"github.com/stencil-operator/stencil/render"
)

// TestClientFlags: the operator's client has no tight client-side limit and
// asks for no gzip unless told to; a kubeconfig that disables compression
// keeps it disabled.
func TestClientFlags(t *testing.T) {
	tests := []struct {
		name               string
		args               []string
		kubeconfigDisables bool
		wantQPS            float32
		wantBurst          int
		wantNoCompression  bool
	}{
		{"defaults", nil, false, 500, 1000, true},
		{"compression asked for", []string{"--kube-api-compression"}, false, 500, 1000, false},
		{"kubeconfig disables it", []string{"--kube-api-compression"}, true, 500, 1000, true},
		{"limits set", []string{"--kube-api-qps=20", "--kube-api-burst=30"}, false, 20, 30, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := parseFlags(t, tt.args)
			cfg := &rest.Config{DisableCompression: tt.kubeconfigDisables}
			tuneClient(cfg, o)
			if cfg.QPS != tt.wantQPS || cfg.Burst != tt.wantBurst || cfg.DisableCompression != tt.wantNoCompression {
				t.Errorf("QPS %v, burst %d, DisableCompression %v; want %v, %d, %v",
					cfg.QPS, cfg.Burst, cfg.DisableCompression, tt.wantQPS, tt.wantBurst, tt.wantNoCompression)
			}
		})
	}
}

// TestMetricsOptions: plain HTTP by default; with --metrics-secure, HTTPS
// behind the API server's authentication and authorization.
func TestMetricsOptions(t *testing.T) {
	tests := []struct {
		name        string
		args        []string
		wantSecure  bool
		wantCertDir string
	}{
		{"default", nil, false, ""},
		{"secure, self-signed", []string{"--metrics-secure"}, true, ""},
		{"secure, own certificate", []string{"--metrics-secure", "--metrics-cert-dir=/certs"}, true, "/certs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o managerOptions
			fs := pflag.NewFlagSet("stencil", pflag.ContinueOnError)
			o.bindFlags(fs)
			if err := fs.Parse(append([]string{"--metrics-bind-address=:8443"}, tt.args...)); err != nil {
				t.Fatal(err)
			}
			got := metricsOptions(o)
			if got.BindAddress != ":8443" || got.SecureServing != tt.wantSecure || (got.FilterProvider != nil) != tt.wantSecure || got.CertDir != tt.wantCertDir {
				t.Errorf("got address %q, secure %v, filter %v, cert dir %q; want :8443, %v, %v, %q",
					got.BindAddress, got.SecureServing, got.FilterProvider != nil, got.CertDir, tt.wantSecure, tt.wantSecure, tt.wantCertDir)
			}
		})
	}
}

// TestDecoratorFlags: decorators are off unless named in --decorators; a
// scope flag names an enabled decorator and a label selector.
func TestDecoratorFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    map[string]string // decorator → "objects | namespaces"
		wantErr string
	}{
		{"none by default", nil, map[string]string{}, ""},
		{"enabled everywhere", []string{"--decorators=replicaset-podcount,namespace-defaults"}, map[string]string{"replicaset-podcount": " | ", "namespace-defaults": " | "}, ""},
		{"scoped", []string{"--decorators=replicaset-podcount", "--decorator-namespace-selector=replicaset-podcount=stencil.dev/podcount=on", "--decorator-object-selector=replicaset-podcount=app in (web,api),tier"},
			map[string]string{"replicaset-podcount": "app in (api,web),tier | stencil.dev/podcount=on"}, ""},
		{"repeated --decorators", []string{"--decorators=replicaset-podcount", "--decorators=namespace-defaults"}, map[string]string{"replicaset-podcount": " | ", "namespace-defaults": " | "}, ""},
		{"a scope of a decorator not enabled", []string{"--decorator-namespace-selector=replicaset-podcount=a=b"}, nil, "not in --decorators"},
		{"no decorator named", []string{"--decorators=replicaset-podcount", "--decorator-object-selector=a=b"}, nil, "decorator a is not in --decorators"},
		{"no selector", []string{"--decorators=replicaset-podcount", "--decorator-object-selector=replicaset-podcount"}, nil, "want <decorator>=<label selector>"},
		{"an empty selector", []string{"--decorators=replicaset-podcount", "--decorator-object-selector=replicaset-podcount="}, nil, "selects everything"},
		{"a bad selector", []string{"--decorators=replicaset-podcount", "--decorator-object-selector=replicaset-podcount=a in b"}, nil, "decorator-object-selector"},
		{"twice", []string{"--decorators=replicaset-podcount", "--decorator-object-selector=replicaset-podcount=a", "--decorator-object-selector=replicaset-podcount=b"}, nil, "given twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := parseFlags(t, tt.args)
			scopes, err := o.decorators.scopes()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for name, s := range scopes {
				str := func(sel labels.Selector) string {
					if sel == nil {
						return ""
					}
					return sel.String()
				}
				got[name] = str(s.Objects) + " | " + str(s.Namespaces)
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("scopes %v, want %v", got, tt.want)
			}
		})
	}
}

// A namespace-scoped install caches only the namespaces it is given, and
// refuses what would need more: decorators, kinds that own cluster-scoped
// types.
func TestNamespaceScoped(t *testing.T) {
	seeds, err := sampleKinds()
	if err != nil {
		t.Fatal(err)
	}
	widget, err := render.Load(testkind.Widget()) // owns a ClusterRole
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		args    []string
		kinds   []*render.Kind
		wantErr string
	}{
		{"the seed kinds", []string{"--watch-namespaces=a,b"}, seeds, ""},
		{"a decorator", []string{"--watch-namespaces=a", "--decorators=replicaset-podcount"}, seeds, "decorators work across namespaces"},
		{"a decorator disabled", []string{"--watch-namespaces=a", "--disable-decorator=replicaset-podcount"}, seeds, "decorators work across namespaces"},
		{"a kind owning a cluster-scoped type", []string{"--watch-namespaces=a"}, []*render.Kind{widget}, "owns the cluster-scoped ClusterRole"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := parseFlags(t, tt.args)
			scopes, err := o.decorators.scopes()
			if err != nil {
				t.Fatal(err)
			}
			var opts cache.Options
			err = namespaceScoped(&opts, o, tt.kinds, scopes)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := slices.Sorted(maps.Keys(opts.DefaultNamespaces)); !slices.Equal(got, []string{"a", "b"}) {
				t.Errorf("cached namespaces %v, want [a b]", got)
			}
		})
	}
}

// A --kind-service-account for a kind stencil does not run, or a name that
// is no ServiceAccount name, is refused at start.
func TestCheckIdentities(t *testing.T) {
	seeds, err := sampleKinds()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		ids     reconciler.Identities
		wantErr string
	}{
		{"none", reconciler.Identities{}, ""},
		{"a default and a kind", reconciler.Identities{Default: "stencil-writer", ByKind: map[string]string{"MyWeb": "web-writer", "Memcached": ""}}, ""},
		{"a kind mistyped", reconciler.Identities{ByKind: map[string]string{"Myweb": "w"}}, `no kind "Myweb"`},
		{"not a name", reconciler.Identities{Default: "Writer_1"}, "is not a ServiceAccount name"},
	} {
		err := checkIdentities(tt.ids, seeds)
		if (err == nil) != (tt.wantErr == "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.wantErr)
		}
	}
}

// parseFlags is the operator's options after parsing args as its flags.
func parseFlags(t *testing.T, args []string) managerOptions {
	t.Helper()
	var o managerOptions
	fs := pflag.NewFlagSet("stencil", pflag.ContinueOnError)
	o.bindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o
}
