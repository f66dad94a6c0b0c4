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
