package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestRenderOffline renders a seed CR with no kubeconfig and no cluster.
func TestRenderOffline(t *testing.T) {
	t.Setenv("KUBECONFIG", "/nonexistent")
	t.Setenv("HOME", t.TempDir())
	tests := []struct {
		name, file, wantOut, wantErr string
	}{
		{"seed MyWeb", "../../config/samples/myweb.yaml", "kind: Service", ""},
		{"full Guestbook sample", "../../config/samples/full/guestbook.yaml", "name: gb-full", ""},
		{"unknown kind", "../../config/rbac/role.yaml", "", `unknown kind "ClusterRole"`},
		{"missing file", "nothing.yaml", "", "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := newRootCommand(samples)
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs([]string{"render", "-f", tt.file})
			err := cmd.Execute()
			switch {
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error = %v, want %q", err, tt.wantErr)
			case tt.wantErr == "" && err != nil:
				t.Fatal(err)
			case !strings.Contains(out.String(), tt.wantOut):
				t.Fatalf("output lacks %q:\n%s", tt.wantOut, out.String())
			}
		})
	}
}

func TestInvalidSpecIsAClearError(t *testing.T) {
	cmd := newRootCommand(samples)
	cmd.SetIn(strings.NewReader("apiVersion: flights.com/v1\nkind: FlightTicket\nmetadata: {name: x}\nspec: {form: A}\n"))
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetArgs([]string{"render", "-f", "-"})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), `invalid FlightTicket`) || !strings.Contains(err.Error(), `unknown field "form"`) {
		t.Fatalf("error = %v, want one naming the kind and the unknown field", err)
	}
}

// TestRenderAppliesCRDDefaults: render defaults a resource with its kind's
// CRD, as the API server stores it, and says so when the CRD is missing.
func TestRenderAppliesCRDDefaults(t *testing.T) {
	const stack = "apiVersion: stacks.stencil.dev/v1alpha1\nkind: AppStack\nmetadata: {name: shop, namespace: team-a, uid: 6c1e3f0a-0d7e-4d35-9a63-2b7f8e4c1a10}\nspec: {version: \"1.0.0\", settings: shop-settings}\n"
	tests := []struct {
		name string
		args []string
		// want is in the output (objects and warnings).
		want string
	}{
		{"with the CRDs", []string{"render", repoCRDs, "-f", "-"}, "image: ghcr.io/example/app:1.0.0"},
		{"without them", []string{"render", "-f", "-"}, "Warning: AppStack is not defaulted: no CRD for stacks.stencil.dev/v1alpha1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := newRootCommand(samples)
			var out bytes.Buffer
			cmd.SetIn(strings.NewReader(stack))
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(append(tt.args, "--observed", "../../templates/appstack/tests/migrated/observed.yaml"))
			if err := cmd.Execute(); err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			if !strings.Contains(out.String(), tt.want) {
				t.Errorf("output lacks %q:\n%s", tt.want, out.String())
			}
		})
	}
}
