package cli

import (
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
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
			var o managerOptions
			fs := pflag.NewFlagSet("stencil", pflag.ContinueOnError)
			o.bindFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
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
