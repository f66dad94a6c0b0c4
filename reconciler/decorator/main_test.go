package decorator_test

import (
	"net/http"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/internal/dev/localcluster"
	"github.com/stencil-operator/stencil/internal/testing/testutil"
)

// The decorators' tests share one local control plane; each test starts
// the decorators it needs in an operator of its own.
var (
	cluster *localcluster.Cluster
	// k8s is the tests' own client (cluster admin), separate from the
	// operators'.
	k8s client.Client
)

func TestMain(m *testing.M) {
	os.Exit(localcluster.RunTests(testingM{m}, localcluster.Options{}, &cluster))
}

type testingM struct{ m *testing.M }

func (t testingM) Run() int {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	var err error
	if k8s, err = client.New(cluster.Config, client.Options{Scheme: scheme}); err != nil {
		panic(err)
	}
	return t.m.Run()
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// eventually polls check until it returns nil, failing the test after within.
var eventually = testutil.Eventually

// newNamespace is a namespace of the test's own.
func newNamespace(t *testing.T) string {
	t.Helper()
	return testutil.NewNamespace(t, k8s)
}

// metric is the value of a stencil metric's sample (see testutil.Metric).
var metric = testutil.Metric
