package reconciler_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/internal/dev/localcluster"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
	"github.com/stencil-operator/stencil/internal/testing/testutil"
	"github.com/stencil-operator/stencil/internal/testing/testutil/testop"
	"github.com/stencil-operator/stencil/reconciler/fence"
	"github.com/stencil-operator/stencil/render"
)

var (
	// cluster is the local control plane, with the operator of Widgets
	// running on it. It starts when the first test asks for it (cluster.Get),
	// so the pure tables (TestComputeStatus, TestBackoff, ...) run alone
	// without one.
	cluster = localcluster.Lazy{SetUp: startOperator}
	// k8s is the tests' own client (cluster admin), separate from the operator's.
	k8s client.Client
	// requests counts the operator's API requests other than watches.
	requests = &counter{}
)

func TestMain(m *testing.M) {
	os.Exit(cluster.RunTests(m))
}

// startOperator makes the tests' client, installs the test kinds' CRDs and
// starts the operator of Widgets, once the control plane has started.
func startOperator(ctx context.Context, c *localcluster.Cluster) error {
	w, err := testop.SetUpWidgets(ctx, c.Config)
	if err != nil {
		return err
	}
	k8s = w.Client
	return testop.StartOperator(ctx, c.Config, w.Scheme, []*render.Kind{w.Widget}, requests.wrap)
}

// counter counts requests by "VERB resource-path", leaving out watches, and
// lets a test inject faults into the operator's traffic (see faults).
type counter struct {
	mu     sync.Mutex
	counts map[string]int
	// inNamespace counts "VERB namespace" for namespaced requests.
	inNamespace map[string]int
	// byPath counts "VERB path"; donePath those that have ended (answered,
	// or failed).
	byPath, donePath map[string]int
	faults           []fault
	// seen is, per object ("resource namespace/name"), the highest
	// resourceVersion that a watch event delivered to the operator.
	seen map[string]int64
}

// countPath is the number of requests with method whose path ends in path
// so far.
func (c *counter) countPath(method, path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return matching(c.byPath, method, path)
}

// countDone is countPath for the requests that have ended.
func (c *counter) countDone(method, path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return matching(c.donePath, method, path)
}

// matching sums the counts of "VERB path" keys with method whose path ends
// in path.
func matching(byPath map[string]int, method, path string) int {
	n := 0
	for k, v := range byPath {
		if strings.HasPrefix(k, method+" ") && strings.HasSuffix(k, path) {
			n += v
		}
	}
	return n
}

// countIn is the number of requests with method (any, when empty) in
// namespace ns so far.
func (c *counter) countIn(method, ns string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if method != "" {
		return c.inNamespace[method+" "+ns]
	}
	n := 0
	for k, v := range c.inNamespace {
		if strings.HasSuffix(k, " "+ns) {
			n += v
		}
	}
	return n
}

// fault changes the operator's requests whose path contains path (and whose
// method is method, when set): it panics, fails them (as a lost connection
// would), refuses its writes as the leader fence does, delays them, or drops
// from their watch streams the events whose line contains drop.
type fault struct {
	method, path string
	panic, fail  bool
	fenced       bool
	delay        time.Duration
	drop         string
}

// inject adds a fault until the test ends, or until the func it returns is
// called.
func (c *counter) inject(t *testing.T, f fault) (remove func()) {
	t.Helper()
	c.mu.Lock()
	c.faults = append(c.faults, f)
	c.mu.Unlock()
	remove = func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.faults = slices.DeleteFunc(c.faults, func(g fault) bool { return g == f })
	}
	t.Cleanup(remove)
	return remove
}

func (c *counter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		watch := req.URL.Query().Get("watch") == "true"
		c.mu.Lock()
		if !watch {
			if c.counts == nil {
				c.counts = map[string]int{}
			}
			c.counts[req.Method+" "+resourceOf(req.URL.Path)]++
			if c.inNamespace == nil {
				c.inNamespace, c.byPath = map[string]int{}, map[string]int{}
			}
			c.byPath[req.Method+" "+req.URL.Path]++
			if _, rest, ok := strings.Cut(req.URL.Path, "/namespaces/"); ok {
				ns, _, _ := strings.Cut(rest, "/")
				c.inNamespace[req.Method+" "+ns]++
			}
		}
		faults := c.matching(req.Method, req.URL.Path)
		c.mu.Unlock()
		for _, f := range faults {
			if f.panic {
				panic("injected by a test: " + req.Method + " " + req.URL.Path)
			}
			if f.fail {
				return nil, errors.New("connection lost, injected by a test: " + req.Method + " " + req.URL.Path)
			}
			if f.fenced && req.Method != http.MethodGet {
				return nil, fmt.Errorf("%w (injected by a test)", fence.ErrFenced)
			}
			time.Sleep(f.delay)
		}
		resp, err := rt.RoundTrip(req)
		if watch && err == nil {
			resp.Body = c.dropEvents(resp.Body, req.URL.Path, resp.Header.Get("Content-Type"))
		}
		if !watch {
			c.mu.Lock()
			if c.donePath == nil {
				c.donePath = map[string]int{}
			}
			c.donePath[req.Method+" "+req.URL.Path]++
			c.mu.Unlock()
		}
		return resp, err
	})
}

// matching are the faults for a request; c.mu must be held.
func (c *counter) matching(method, path string) []fault {
	var out []fault
	for _, f := range c.faults {
		if strings.Contains(path, f.path) && (f.method == "" || f.method == method) {
			out = append(out, f)
		}
	}
	return out
}

// dropped reports whether a watch event line of path is to be dropped by
// the faults in force now (also for watches opened before the fault).
func (c *counter) dropped(path, line string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range c.matching("GET", path) {
		if f.drop != "" && strings.Contains(line, f.drop) {
			return true
		}
	}
	return false
}

// dropEvents passes a watch body on without the events that a fault drops:
// JSON lines, or protobuf frames (a 4-byte big-endian length, then the
// event), as the metadata client asks for.
func (c *counter) dropEvents(body io.ReadCloser, path, contentType string) io.ReadCloser {
	r, w := io.Pipe()
	protobuf := strings.Contains(contentType, "protobuf")
	next := nextLine
	if protobuf {
		next = nextFrame
	}
	go func() {
		in := bufio.NewReaderSize(body, 1<<20)
		for {
			event, err := next(in)
			if err != nil {
				w.CloseWithError(err)
				return
			}
			if c.dropped(path, string(event)) {
				continue
			}
			c.see(path, event, protobuf)
			if _, err := w.Write(event); err != nil {
				return
			}
		}
	}()
	return struct {
		io.Reader
		io.Closer
	}{r, closers{r, body}}
}

// nextLine reads one JSON watch event, with its newline.
func nextLine(in *bufio.Reader) ([]byte, error) {
	return in.ReadBytes('\n')
}

// nextFrame reads one protobuf watch frame, with its length prefix.
func nextFrame(in *bufio.Reader) ([]byte, error) {
	frame := make([]byte, 4)
	if _, err := io.ReadFull(in, frame); err != nil {
		return nil, err
	}
	frame = append(frame, make([]byte, binary.BigEndian.Uint32(frame))...)
	if _, err := io.ReadFull(in, frame[4:]); err != nil {
		return nil, err
	}
	return frame, nil
}

// see records the object of a watch event (a protobuf frame, or a JSON
// line) that path delivered to the operator.
func (c *counter) see(path string, event []byte, protobuf bool) {
	m, ok := eventObject(event, protobuf)
	if !ok {
		return
	}
	rv, err := strconv.ParseInt(m.ResourceVersion, 10, 64)
	if err != nil {
		return
	}
	key := resourceOf(path) + " " + m.Namespace + "/" + m.Name
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[string]int64{}
	}
	c.seen[key] = max(c.seen[key], rv)
}

// eventObject is the metadata of the object of a watch event, a JSON line
// or a protobuf frame; not ok for a bookmark, an error, or what it cannot
// decode.
func eventObject(event []byte, protobuf bool) (_ metav1.ObjectMeta, ok bool) {
	if !protobuf {
		var e struct {
			Type   watch.EventType
			Object struct{ Metadata metav1.ObjectMeta }
		}
		if json.Unmarshal(event, &e) != nil || !objectEvent(e.Type) {
			return metav1.ObjectMeta{}, false
		}
		return e.Object.Metadata, true
	}
	// A frame is a metav1.WatchEvent whose object is enveloped: the
	// protobuf magic number, then a runtime.Unknown that holds the object,
	// whose first field, as a PartialObjectMetadata's, is its metadata.
	var e metav1.WatchEvent
	if len(event) < 4 || e.Unmarshal(event[4:]) != nil || !objectEvent(watch.EventType(e.Type)) {
		return metav1.ObjectMeta{}, false
	}
	enveloped, isEnvelope := bytes.CutPrefix(e.Object.Raw, []byte("k8s\x00"))
	var unknown runtime.Unknown
	var m metav1.PartialObjectMetadata
	if !isEnvelope || unknown.Unmarshal(enveloped) != nil || m.Unmarshal(unknown.Raw) != nil {
		return metav1.ObjectMeta{}, false
	}
	return m.ObjectMeta, true
}

// objectEvent: a watch event of this type carries an object.
func objectEvent(typ watch.EventType) bool {
	return typ == watch.Added || typ == watch.Modified || typ == watch.Deleted
}

// seenAt is the highest resourceVersion at which the operator's watches
// delivered the object namespace/name of resource (0: none).
func (c *counter) seenAt(resource, namespace, name string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen[resource+" "+namespace+"/"+name]
}

// waitSeen waits until c's operator has received each object, through its
// watches, as it is now (or later): its cache holds what the test wrote,
// or the last writes' own events have reached it.
func waitSeen(t *testing.T, c *counter, objs ...client.Object) {
	t.Helper()
	cluster.Get(t)
	for _, o := range objs {
		if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(o), o); err != nil {
			t.Fatal(err)
		}
		gvk, err := k8s.GroupVersionKindFor(o)
		if err != nil {
			t.Fatal(err)
		}
		mapping, err := k8s.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatal(err)
		}
		rv, err := strconv.ParseInt(o.GetResourceVersion(), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		resource := mapping.Resource.Resource
		eventually(t, 30*time.Second, fmt.Sprintf("the operator's watch delivering %s %s/%s at resourceVersion %d", gvk.Kind, o.GetNamespace(), o.GetName(), rv), func() error {
			if at := c.seenAt(resource, o.GetNamespace(), o.GetName()); at < rv {
				return fmt.Errorf("delivered at %d", at)
			}
			return nil
		})
	}
}

// waitIdle waits until the operator has received each object as it is now
// (see waitSeen), and then until its Widget reconciles and its requests
// have stopped for a second: what those objects' last changes woke has
// ended. A test can then check what stencil did, or did not do, about
// them.
func waitIdle(t *testing.T, objs ...client.Object) {
	t.Helper()
	waitSeen(t, requests, objs...)
	testutil.Settle(t, time.Minute, time.Second, "the operator's Widget reconciles and requests", func() int {
		return widgetReconciles(t) + requests.total()
	})
}

type closers []io.Closer

func (cs closers) Close() error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// total is the number of requests counted so far.
func (c *counter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.counts {
		n += v
	}
	return n
}

// reset returns the counts so far and starts again from zero.
func (c *counter) reset() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.counts
	c.counts = nil
	return out
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// newNamespace is a namespace of the test's own, whose Widgets are deleted
// (and gone) when the test ends.
func newNamespace(t *testing.T) string {
	t.Helper()
	cluster.Get(t)
	ns := testutil.NewNamespace(t, k8s)
	t.Cleanup(func() { deleteWidgets(t, ns) })
	return ns
}

// deleteWidgets deletes the Widgets of a test's namespace and waits until
// they are gone, so that nothing a test leaves (a retry with backoff, a
// backstop reconcile) reaches the tests after it.
func deleteWidgets(t *testing.T, ns string) {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	testutil.Eventually(t, 30*time.Second, "the test's Widgets deleted", func() error {
		if err := k8s.DeleteAllOf(ctx, &testv1alpha1.Widget{}, client.InNamespace(ns)); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		list := &testv1alpha1.WidgetList{}
		if err := k8s.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(list.Items) > 0 {
			return fmt.Errorf("%d Widgets left", len(list.Items))
		}
		return nil
	})
}

// garbageCollector records whether kube-controller-manager's garbage
// collector has been seen handling the deletion of the test kinds.
var garbageCollector struct {
	sync.Mutex
	collects bool
}

// waitGarbageCollector waits until kube-controller-manager's garbage
// collector handles the deletion of Widgets and Gadgets (it deletes their
// dependents), for a test whose deadlines count on it. The collector
// learns of custom resource types only when it next reads the API
// server's discovery (every 30 s), so, right after the first test's
// cluster.Get installed the CRDs (a test run alone), it would take its time within the test's own
// deadline. The probe: a ConfigMap owned by a Widget and one owned by a
// Gadget, whose owners are deleted.
func waitGarbageCollector(t *testing.T) {
	t.Helper()
	cluster.Get(t)
	garbageCollector.Lock()
	defer garbageCollector.Unlock()
	if garbageCollector.collects {
		return
	}
	ns := newNamespace(t)
	owners := []client.Object{
		&testv1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gc-probe"}, Spec: testv1alpha1.WidgetSpec{Message: "m"}},
		&testv1alpha1.Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gc-probe"}},
	}
	var dependents []client.Object
	for _, owner := range owners {
		if err := k8s.Create(t.Context(), owner); err != nil {
			t.Fatal(err)
		}
		gvk, err := k8s.GroupVersionKindFor(owner)
		if err != nil {
			t.Fatal(err)
		}
		dependent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gc-probe-" + strings.ToLower(gvk.Kind), OwnerReferences: []metav1.OwnerReference{{
			APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: owner.GetName(), UID: owner.GetUID(),
		}}}}
		if err := k8s.Create(t.Context(), dependent); err != nil {
			t.Fatal(err)
		}
		dependents = append(dependents, dependent)
	}
	for _, owner := range owners {
		if err := k8s.Delete(t.Context(), owner); err != nil {
			t.Fatal(err)
		}
	}
	began := time.Now()
	eventually(t, 3*time.Minute, "the garbage collector deleting the dependents of a deleted Widget and Gadget", func() error {
		for _, d := range dependents {
			switch err := k8s.Get(t.Context(), client.ObjectKeyFromObject(d), &corev1.ConfigMap{}); {
			case err == nil:
				return fmt.Errorf("ConfigMap %s is still there", d.GetName())
			case !apierrors.IsNotFound(err):
				return err
			}
		}
		return nil
	})
	t.Logf("the garbage collector deleted the probes' dependents %s after their owners' deletion", time.Since(began).Round(time.Second))
	garbageCollector.collects = true
}

// forgetGarbageCollector makes the next waitGarbageCollector probe again,
// after a test replaced a CRD.
func forgetGarbageCollector() {
	garbageCollector.Lock()
	defer garbageCollector.Unlock()
	garbageCollector.collects = false
}

// eventually polls check until it returns nil, failing the test after within.
var eventually = testutil.Eventually

// getWidget reads a Widget.
func getWidget(t *testing.T, ns, name string) *testv1alpha1.Widget {
	t.Helper()
	cluster.Get(t)
	w := &testv1alpha1.Widget{}
	if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, w); err != nil {
		t.Fatal(err)
	}
	return w
}

// waitReady waits until the Widget is Ready for its current generation.
func waitReady(t *testing.T, ns, name string) *testv1alpha1.Widget {
	t.Helper()
	var w *testv1alpha1.Widget
	eventually(t, 30*time.Second, "Widget "+name+" Ready", func() error {
		w = getWidget(t, ns, name)
		return readyErr(w)
	})
	return w
}

func readyErr(w *testv1alpha1.Widget) error {
	c := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReady)
	if c == nil || c.Status != metav1.ConditionTrue || w.Status.ObservedGeneration != w.Generation {
		return fmt.Errorf("Ready=%v observedGeneration=%d generation=%d", c, w.Status.ObservedGeneration, w.Generation)
	}
	return nil
}

// resourceOf reduces a request path to its resource (and subresource), as in
// "deployments" or "widgets/status".
func resourceOf(path string) string {
	seg := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(seg) >= 2 && seg[0] == "api":
		seg = seg[2:]
	case len(seg) >= 3 && seg[0] == "apis":
		seg = seg[3:]
	default:
		return path
	}
	if len(seg) >= 3 && seg[0] == "namespaces" {
		seg = seg[2:]
	}
	switch len(seg) {
	case 0:
		return path
	case 3:
		return seg[0] + "/" + seg[2]
	default:
		return seg[0]
	}
}

// metric is the value of a stencil metric's sample (see testutil.Metric).
var metric = testutil.Metric
