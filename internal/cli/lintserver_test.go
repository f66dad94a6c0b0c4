package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/internal/testing/testutil"
)

// TestLintServer: lint --server dry-runs each sample and its objects against
// a real API server, which refuses what the offline checks cannot know.
func TestLintServer(t *testing.T) {
	cluster := startAPIServer(t)
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cluster.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := testutil.InstallCRDs(t.Context(), c, os.DirFS("../../config/crd/bases")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", cluster.Kubeconfig)

	tests := []struct {
		name string
		// sample is the file lint --server checks.
		sample string
		// want is in the output when lint must fail; "" when it must pass.
		want string
	}{
		{"a valid sample and its objects", "apiVersion: operator.k8s-summit.org/v1\nkind: MyWeb\nmetadata: {name: web, namespace: default}\nspec: {image: nginx, nodePortNumber: 30100}\n", ""},
		{"a CEL rule of the CRD that only the API server runs",
			"apiVersion: flights.com/v1\nkind: FlightTicket\nmetadata: {name: round, namespace: default}\nspec: {from: Mumbai, to: Mumbai, number: 1}\n",
			"FlightTicket round: the API server refuses it"},
		{"a namespace the cluster lacks",
			"apiVersion: operator.k8s-summit.org/v1\nkind: MyWeb\nmetadata: {name: web, namespace: nowhere}\nspec: {image: nginx, nodePortNumber: 30100}\n",
			`namespaces "nowhere" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "sample.yaml")
			if err := os.WriteFile(file, []byte(tt.sample), 0o644); err != nil {
				t.Fatal(err)
			}
			offline, code, err := execute(t, "lint", repoCRDs, "-f", file)
			if code != 0 {
				t.Fatalf("offline lint: exit %d (%v), want 0: the case is for the server\n%s", code, err, offline)
			}
			out, code, err := execute(t, "lint", "--server", repoCRDs, "-f", file)
			all := out + errString(err)
			if tt.want == "" {
				if code != 0 {
					t.Fatalf("exit %d, want 0:\n%s", code, all)
				}
				return
			}
			if code != 2 || !strings.Contains(all, tt.want) {
				t.Fatalf("exit %d, want 2 and %q:\n%s", code, tt.want, all)
			}
		})
	}
	// The dry runs stored nothing.
	webs := &unstructured.UnstructuredList{}
	webs.SetAPIVersion("operator.k8s-summit.org/v1")
	webs.SetKind("MyWebList")
	if err := c.List(t.Context(), webs); err != nil || len(webs.Items) > 0 {
		t.Errorf("MyWebs after lint --server: %d (%v), want none", len(webs.Items), err)
	}
}
