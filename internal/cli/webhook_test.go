package cli

import (
	"os"
	"testing"
	"testing/fstest"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/internal/testing/testutil"
)

// TestConversionWithoutANamespaceLetsTheOperatorRun: stencil run outside a
// pod with no flag that names where the webhook's certificate is kept
// (no --webhook-url, --webhook-cert-secret or --leader-election-namespace:
// `go run . ` against a cluster, or the benchmark) still runs its kinds;
// only the conversion is not served. It refused to start before.
func TestConversionWithoutANamespaceLetsTheOperatorRun(t *testing.T) {
	if _, err := os.Stat(inClusterNamespace); err == nil {
		t.Skip("this process runs in a pod: it has a namespace")
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // outside a pod
	cluster := startAPIServer(t)
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cluster.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	crd, err := os.ReadFile("../../config/crd/bases/cache.example.com_memcacheds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := testutil.InstallCRDs(t.Context(), c, fstest.MapFS{"memcacheds.yaml": {Data: crd}}); err != nil {
		t.Fatal(err)
	}
	loaded, err := sampleKinds()
	if err != nil {
		t.Fatal(err)
	}

	w, err := setUpConversion(t.Context(), cluster.Config, managerOptions{project: &operator{Set: samples}}, loaded, ctrl.Log)
	if err != nil {
		t.Fatalf("setting up the conversion webhook stops the operator: %v", err)
	}
	if w != nil {
		t.Errorf("a webhook is served with a certificate kept nowhere")
	}
	// In a pod that cannot tell its namespace, the install is broken: the
	// operator stops, as before.
	t.Setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
	if _, err := setUpConversion(t.Context(), cluster.Config, managerOptions{project: &operator{Set: samples}}, loaded, ctrl.Log); err == nil {
		t.Errorf("in a pod without its namespace, the webhook set-up goes on")
	}
	// A malformed flag is still refused.
	if _, err := setUpConversion(t.Context(), cluster.Config, managerOptions{project: &operator{Set: samples}, webhook: webhookOptions{certSecret: "no-slash"}}, loaded, ctrl.Log); err == nil {
		t.Errorf("--webhook-cert-secret=no-slash is accepted")
	}
}
