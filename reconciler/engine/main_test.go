package engine_test

import (
	"context"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/internal/dev/localcluster"
	"github.com/stencil-operator/stencil/internal/testing/testutil"
	"github.com/stencil-operator/stencil/internal/testing/testutil/testop"
	"github.com/stencil-operator/stencil/reconciler/engine"
	"github.com/stencil-operator/stencil/render"
)

// The engine's tests that talk to Kubernetes run on one local control plane,
// without an operator: each drives an Applier of its own (newHarness), over a
// cache as the operator's, on the objects the Widget test kind renders. The
// control plane starts when the first of them asks for it, so the unit tables
// (TestDecide, TestOwnership, ...) run alone without one.
var (
	cluster = localcluster.Lazy{SetUp: setUp}
	// k8s is the tests' own client (cluster admin), separate from the
	// engine's; it plays the other field managers.
	k8s    client.Client
	scheme *runtime.Scheme
	widget *render.Kind
)

func TestMain(m *testing.M) {
	os.Exit(cluster.RunTests(m))
}

// setUp makes the tests' client and installs the test kinds' CRDs, once the
// control plane has started.
func setUp(ctx context.Context, c *localcluster.Cluster) error {
	w, err := testop.SetUpWidgets(ctx, c.Config)
	k8s, scheme, widget = w.Client, w.Scheme, w.Widget
	return err
}

// harness is an Applier of Widgets' objects, over a cache of stencil's
// objects (as the operator's), counting the requests it sends.
type harness struct {
	*engine.Applier
	requests *requestCount
}

// newHarness starts an Applier whose cache and clients live until the test
// ends. It caches the Widget's owned types as the operator does, and whole
// each of also (as it caches a type whose health it judges).
func newHarness(t testing.TB, also ...schema.GroupVersionKind) *harness {
	t.Helper()
	count := &requestCount{}
	cfg := rest.CopyConfig(cluster.Get(t).Config)
	cfg.WrapTransport = count.wrap
	managed, err := labels.Parse(v1alpha1.LabelManagedBy + "=" + v1alpha1.ManagedByStencil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cache.New(cfg, cache.Options{Scheme: scheme, DefaultLabelSelector: managed})
	if err != nil {
		t.Fatal(err)
	}
	types := engine.CachedTypes{Whole: map[schema.GroupVersionKind]bool{}, Scheme: scheme}
	var owns []engine.OwnedType
	for _, ref := range widget.Declaration().Owns {
		types.Whole[ref.GroupVersionKind()] = ref.JudgesHealth()
		owns = append(owns, engine.OwnedType{GVK: ref.GroupVersionKind(), ClusterScoped: ref.ClusterScoped})
	}
	for _, gvk := range also {
		types.Whole[gvk] = true
		owns = append(owns, engine.OwnedType{GVK: gvk})
	}
	if err := engine.IndexOwnerUID(c, types); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync")
	}
	cached, err := client.New(cfg, client.Options{Scheme: scheme, Cache: &client.CacheOptions{Reader: c, Unstructured: true}})
	if err != nil {
		t.Fatal(err)
	}
	reader, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	a, err := engine.New(engine.Options{Client: cached, Reader: reader, Types: types, FirstApplies: &engine.FirstApplies{},
		OwnerKind: widget.GroupVersionKind(), Owns: owns, Recorder: events.NewFakeRecorder(100)})
	if err != nil {
		t.Fatal(err)
	}
	return &harness{requests: count, Applier: a}
}

// requestCount counts the requests other than watches, by "VERB path", and
// "VERB path (dry run)" for a dry run.
type requestCount struct {
	mu     sync.Mutex
	counts map[string]int
}

func (c *requestCount) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if req.URL.Query().Get("watch") != "true" {
			c.mu.Lock()
			if c.counts == nil {
				c.counts = map[string]int{}
			}
			key := req.Method + " " + req.URL.Path
			if req.URL.Query().Get("dryRun") == "All" {
				key += " (dry run)"
			}
			c.counts[key]++
			c.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

// take returns the counts so far and starts again from zero.
func (c *requestCount) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	counts := c.counts
	c.counts = nil
	return counts
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// newNamespace is a namespace of the test's own.
func newNamespace(t testing.TB) string {
	t.Helper()
	cluster.Get(t)
	return testutil.NewNamespace(t, k8s)
}

// eventually polls check until it returns nil, failing the test after within.
var eventually = testutil.Eventually

// installSchemaless installs (once per control plane) a namespaced custom
// resource type of kind that keeps any field and that the tests' scheme does
// not know, so a cache that holds it whole holds maps; it returns its type.
func installSchemaless(t testing.TB, kind string) schema.GroupVersionKind {
	t.Helper()
	cluster.Get(t)
	gvk := schema.GroupVersionKind{Group: "engine.test.stencil.dev", Version: "v1", Kind: kind}
	plural := render.Plural(strings.ToLower(kind))
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := k8s.Get(t.Context(), client.ObjectKey{Name: plural + "." + gvk.Group}, crd); err == nil {
		return gvk
	}
	src := testutil.SchemalessCRD(gvk.Group, kind, plural)
	if err := testutil.InstallCRDs(t.Context(), k8s, fstest.MapFS{"crd.yaml": {Data: []byte(src)}}); err != nil {
		t.Fatal(err)
	}
	return gvk
}

// ownedLike is an object of type gvk named name, with fields, carrying the
// labels and annotations of like, one of the render's objects (so the same
// owner).
func ownedLike(like *unstructured.Unstructured, gvk schema.GroupVersionKind, name string, fields map[string]any) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: fields}
	o.SetGroupVersionKind(gvk)
	o.SetNamespace(like.GetNamespace())
	o.SetName(name)
	o.SetLabels(like.GetLabels())
	o.SetAnnotations(like.GetAnnotations())
	return o
}
