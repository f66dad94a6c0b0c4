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
			cmd := newRootCommand()
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
	cmd := newRootCommand()
	cmd.SetIn(strings.NewReader("apiVersion: flights.com/v1\nkind: FlightTicket\nmetadata: {name: x}\nspec: {form: A}\n"))
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetArgs([]string{"render", "-f", "-"})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), `invalid FlightTicket`) || !strings.Contains(err.Error(), `unknown field "form"`) {
		t.Fatalf("error = %v, want one naming the kind and the unknown field", err)
	}
}
