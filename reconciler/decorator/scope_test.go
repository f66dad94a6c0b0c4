package decorator_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/internal/testing/samples"
	"github.com/stencil-operator/stencil/internal/testing/testutil/testop"
	"github.com/stencil-operator/stencil/reconciler/decorator"
	"github.com/stencil-operator/stencil/render"
)

// witness annotates each ReplicaSet labelled witness=on: once it has, the
// operator has seen that ReplicaSet.
var witness = fstest.MapFS{
	"_decorator.yaml": {Data: []byte(`decorates:
  apiVersion: apps/v1
  kind: ReplicaSet
  selector: {matchLabels: {witness: "on"}}
`)},
	"replicaset.yaml": {Data: []byte(`apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: {{ .Object.metadata.name }}
  namespace: {{ .Object.metadata.namespace }}
  annotations:
    witness: seen
`)},
}

const podCount = "replicaset-podcount"

// shipped is the shipped decorator name.
func shipped(t *testing.T, name string) *render.Decorator {
	t.Helper()
	all, err := samples.LoadDecorators()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range all {
		if d.Name() == name {
			return d
		}
	}
	t.Fatalf("no shipped decorator %s", name)
	return nil
}

// requestLog records one operator's requests, "METHOD path?query".
type requestLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *requestLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		l.mu.Lock()
		query, _ := url.QueryUnescape(req.URL.RawQuery)
		l.lines = append(l.lines, req.Method+" "+req.URL.Path+"?"+query)
		l.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

// with are the requests that contain every one of parts.
func (l *requestLog) with(parts ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(line, p) }) {
			out = append(out, line)
		}
	}
	return out
}

// startDecorators runs decs until ctx ends, enabled as enabled says (the
// others off), and returns the log of its requests.
func startDecorators(t *testing.T, ctx context.Context, decs []*render.Decorator, enabled map[string]decorator.Scope) *requestLog {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	log := &requestLog{}
	if err := testop.StartDecorators(ctx, cluster.Config, scheme, decs, enabled, nil, log.wrap); err != nil {
		t.Fatal(err)
	}
	return log
}

// selector parses a label selector.
func selector(t *testing.T, s string) labels.Selector {
	t.Helper()
	sel, err := labels.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

// labelNamespace sets label scope-test=<ns> on ns, or removes it.
func labelNamespace(t *testing.T, ns string, on bool) {
	t.Helper()
	value := `"` + ns + `"`
	if !on {
		value = "null"
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{"scope-test":%s}}}`, value)
	if err := k8s.Patch(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// newReplicaSet creates a ReplicaSet of no replicas (no pods: its
// pod-count is 0).
func newReplicaSet(t *testing.T, ns, name string, lbls map[string]string) *appsv1.ReplicaSet {
	t.Helper()
	zero := int32(0)
	sel := map[string]string{"app": name}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: lbls},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &zero,
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}},
		},
	}
	if err := k8s.Create(t.Context(), rs); err != nil {
		t.Fatal(err)
	}
	return rs
}

// decoration is what replicaset-podcount set on rs: its pod-count label
// ("" for none), and whether its field manager holds fields there.
func decoration(t *testing.T, rs *appsv1.ReplicaSet) (string, bool) {
	t.Helper()
	live := &appsv1.ReplicaSet{}
	if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(rs), live); err != nil {
		t.Fatal(err)
	}
	held := slices.ContainsFunc(live.ManagedFields, func(e metav1.ManagedFieldsEntry) bool {
		return e.Manager == decorator.Manager(podCount)
	})
	return live.Labels["pod-count"], held
}

// decorated: rs has pod-count=0, set by replicaset-podcount.
func decorated(t *testing.T, rs *appsv1.ReplicaSet) func() error {
	t.Helper()
	return func() error {
		if count, held := decoration(t, rs); count != "0" || !held {
			return fmt.Errorf("%s: pod-count=%q, decorator's fields: %v", rs.Name, count, held)
		}
		return nil
	}
}

// untouched: replicaset-podcount holds nothing on rs, and it has no
// pod-count.
func untouched(t *testing.T, rs *appsv1.ReplicaSet) func() error {
	t.Helper()
	return func() error {
		if count, held := decoration(t, rs); count != "" || held {
			return fmt.Errorf("%s: pod-count=%q, decorator's fields: %v", rs.Name, count, held)
		}
		return nil
	}
}

// stays fails the test unless check keeps passing for d.
func stays(t *testing.T, d time.Duration, what string, check func() error) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if err := check(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

// TestDecoratorsAreOffUnlessEnabled: a decorator loaded but not enabled
// writes nothing on the objects of its type (seed 004 labelled every
// ReplicaSet of the cluster by default).
func TestDecoratorsAreOffUnlessEnabled(t *testing.T) {
	w, err := render.LoadDecorator("witness", witness)
	if err != nil {
		t.Fatal(err)
	}
	ns := newNamespace(t)
	rs := newReplicaSet(t, ns, "rs", map[string]string{"witness": "on"})
	log := startDecorators(t, t.Context(), []*render.Decorator{shipped(t, podCount), w}, map[string]decorator.Scope{"witness": {}})
	eventually(t, 30*time.Second, "the witness annotation", func() error {
		live := &appsv1.ReplicaSet{}
		if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(rs), live); err != nil {
			return err
		}
		if live.Annotations["witness"] != "seen" {
			return fmt.Errorf("annotations %v", live.Annotations)
		}
		return nil
	})
	stays(t, 2*time.Second, "replicaset-podcount, off", untouched(t, rs))
	if patches := log.with("PATCH", "fieldManager="+decorator.Manager(podCount)); len(patches) > 0 {
		t.Errorf("replicaset-podcount is off, and patched: %v", patches)
	}
}

// TestDecoratorNamespaceSelector: enabled for the namespaces labelled
// scope-test=<in>, replicaset-podcount decorates the ReplicaSets there and
// writes nothing elsewhere; it gives up what it set when the namespace loses
// the label, and decorates again when it gets it back.
func TestDecoratorNamespaceSelector(t *testing.T) {
	in, out := newNamespace(t), newNamespace(t)
	labelNamespace(t, in, true)
	rsOut := newReplicaSet(t, out, "rs", nil)
	rsIn := newReplicaSet(t, in, "rs", nil)
	scope := decorator.Scope{Namespaces: selector(t, "scope-test="+in)}
	log := startDecorators(t, t.Context(), []*render.Decorator{shipped(t, podCount)}, map[string]decorator.Scope{podCount: scope})

	eventually(t, 30*time.Second, "the ReplicaSet in scope decorated", decorated(t, rsIn))
	stays(t, 2*time.Second, "the ReplicaSet out of scope", untouched(t, rsOut))
	if sent := log.with("/namespaces/" + out + "/"); len(sent) > 0 {
		t.Errorf("requests in the namespace out of scope: %v", sent)
	}

	labelNamespace(t, in, false)
	eventually(t, 30*time.Second, "given up when the namespace left the scope", untouched(t, rsIn))
	labelNamespace(t, in, true)
	eventually(t, 30*time.Second, "decorated when it came back", decorated(t, rsIn))
	if err := untouched(t, rsOut)(); err != nil {
		t.Error(err)
	}
}

// TestDecoratorObjectSelector: with an object selector, the decorators'
// cache lists and watches only the ReplicaSets it selects; a ReplicaSet an
// earlier, wider scope decorated is given up when the operator starts, and
// one that loses the label when it does.
func TestDecoratorObjectSelector(t *testing.T) {
	ns := newNamespace(t)
	labelNamespace(t, ns, true)
	a := newReplicaSet(t, ns, "a", map[string]string{"podcount": "on"})
	b := newReplicaSet(t, ns, "b", nil)
	dec := []*render.Decorator{shipped(t, podCount)}
	inNamespace := selector(t, "scope-test="+ns)

	// First every ReplicaSet of the namespace.
	wider, stop := context.WithCancel(t.Context())
	startDecorators(t, wider, dec, map[string]decorator.Scope{podCount: {Namespaces: inNamespace}})
	eventually(t, 30*time.Second, "a decorated", decorated(t, a))
	eventually(t, 30*time.Second, "b decorated", decorated(t, b))
	stop()

	log := startDecorators(t, t.Context(), dec, map[string]decorator.Scope{podCount: {Namespaces: inNamespace, Objects: selector(t, "podcount=on")}})
	eventually(t, 30*time.Second, "b, out of the object selector, given up", untouched(t, b))
	if err := decorated(t, a)(); err != nil {
		t.Error(err)
	}
	watches := log.with("/replicasets", "watch=true")
	if len(watches) == 0 {
		t.Error("no watch of ReplicaSets")
	}
	for _, w := range watches {
		if !strings.Contains(w, "labelSelector=podcount=on") {
			t.Errorf("a watch of every ReplicaSet: %s", w)
		}
	}

	if err := k8s.Patch(t.Context(), a, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"podcount":null}}}`))); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "a, relabelled out of the selector, given up", untouched(t, a))
}

// TestDecoratorOffReportsLeftovers: what a decorator set stays when a later
// operator runs without it, and is counted in
// stencil_decorator_leftover_objects.
func TestDecoratorOffReportsLeftovers(t *testing.T) {
	ns := newNamespace(t)
	labelNamespace(t, ns, true)
	rs := newReplicaSet(t, ns, "rs", nil)
	dec := []*render.Decorator{shipped(t, podCount)}
	on, stop := context.WithCancel(t.Context())
	startDecorators(t, on, dec, map[string]decorator.Scope{podCount: {Namespaces: selector(t, "scope-test="+ns)}})
	eventually(t, 30*time.Second, "decorated", decorated(t, rs))
	stop()

	startDecorators(t, t.Context(), dec, nil)
	eventually(t, 30*time.Second, "the leftovers counted", func() error {
		if n := metric(t, "stencil_decorator_leftover_objects", map[string]string{"kind": podCount}); n < 1 {
			return fmt.Errorf("stencil_decorator_leftover_objects %v", n)
		}
		return nil
	})
	if err := decorated(t, rs)(); err != nil {
		t.Errorf("with the decorator off: %v", err)
	}
}

// TestNamespaceDecoratorScope: for a decorator of Namespaces, the namespace
// selector reads the Namespace's own labels: namespace-defaults makes its
// children only in the Namespaces that both its own selector and the scope
// select, and prunes them when a Namespace leaves the scope.
func TestNamespaceDecoratorScope(t *testing.T) {
	in, out := newNamespace(t), newNamespace(t)
	for _, ns := range []string{in, out} {
		if err := k8s.Patch(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"stencil.dev/defaults":"on"}}}`))); err != nil {
			t.Fatal(err)
		}
	}
	labelNamespace(t, in, true)
	const name = "namespace-defaults"
	startDecorators(t, t.Context(), []*render.Decorator{shipped(t, name)}, map[string]decorator.Scope{name: {Namespaces: selector(t, "scope-test="+in)}})
	quota := func(ns string) error {
		return k8s.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "defaults"}, &corev1.ResourceQuota{})
	}
	noQuota := func(ns string) func() error {
		return func() error {
			switch err := quota(ns); {
			case err == nil:
				return fmt.Errorf("quota defaults in %s", ns)
			case !apierrors.IsNotFound(err):
				return err
			}
			return nil
		}
	}
	eventually(t, 30*time.Second, "the quota in the Namespace in scope", func() error { return quota(in) })
	stays(t, 2*time.Second, "out of scope", noQuota(out))
	labelNamespace(t, in, false)
	eventually(t, 30*time.Second, "the quota pruned when the Namespace left the scope", noQuota(in))
}
