package processtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/internal/dev/localcluster"
	"github.com/stencil-operator/stencil/internal/testing/testkind"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
	"github.com/stencil-operator/stencil/internal/testing/testutil"
	"github.com/stencil-operator/stencil/internal/testing/testutil/testop"
	"github.com/stencil-operator/stencil/reconciler/shard"
	"github.com/stencil-operator/stencil/render"
)

var (
	cluster *localcluster.Cluster
	k8s     client.Client
	scheme  = runtime.NewScheme()
)

func TestMain(m *testing.M) {
	os.Exit(localcluster.RunTests(m, localcluster.Options{}, &cluster))
}

// writes records one shard's write requests to the API server (start and
// end), and can delay those whose path contains slow.
type writes struct {
	mu    sync.Mutex
	spans []span
	slow  string
	delay time.Duration
}

type span struct {
	path       string
	start, end time.Time
	// rv is the resourceVersion the API server gave the written object
	// (0: unknown, or the write failed): the server's order of writes.
	rv int64
}

func (w *writes) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodGet {
			return rt.RoundTrip(req)
		}
		w.mu.Lock()
		slow, delay := w.slow, w.delay
		i := len(w.spans)
		w.spans = append(w.spans, span{path: req.URL.Path, start: time.Now()}) // in flight until end is set
		w.mu.Unlock()
		if slow != "" && strings.Contains(req.URL.Path, slow) {
			time.Sleep(delay)
		}
		resp, err := rt.RoundTrip(req)
		end, rv := time.Now(), int64(0)
		if err == nil && resp.StatusCode < 300 && resp.Body != nil {
			data, readErr := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(data))
			if readErr != nil {
				return nil, readErr
			}
			rv = resourceVersion(data)
		}
		w.mu.Lock()
		w.spans[i].end, w.spans[i].rv = end, rv
		w.mu.Unlock()
		return resp, err
	})
}

// resourceVersion reads metadata.resourceVersion from a JSON answer; 0
// when it has none (or is not JSON).
func resourceVersion(data []byte) int64 {
	var obj struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if json.Unmarshal(data, &obj) != nil {
		return 0
	}
	rv, _ := strconv.ParseInt(obj.Metadata.ResourceVersion, 10, 64)
	return rv
}

// of lists the spans of writes whose path contains s.
func (w *writes) of(s string) []span {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []span
	for _, sp := range w.spans {
		if strings.Contains(sp.path, s) {
			out = append(out, sp)
		}
	}
	return out
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

var (
	setUpOnce sync.Once
	widget    *render.Kind
	setUpErr  error
)

// setup installs the test kind's CRD and loads the kind, once for the
// package's tests.
func setup(t *testing.T) *render.Kind {
	t.Helper()
	setUpOnce.Do(func() { widget, setUpErr = setUp(t.Context()) })
	if setUpErr != nil {
		t.Fatal(setUpErr)
	}
	return widget
}

func setUp(ctx context.Context) (*render.Kind, error) {
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, testv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	var err error
	if k8s, err = client.New(cluster.Config, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	if err := testutil.InstallCRDs(ctx, k8s, testkind.CRDs()); err != nil {
		return nil, err
	}
	return render.Load(testkind.Widget())
}

// TestMovedResourceHasOneWriterAtATime: a Widget relabelled from shard a
// to shard b while a's reconcile of it is in flight (its writes held back
// 3 s) is written by b only after a's last write ended: b waits for a's
// claim, which a gives up once the Widget has left its view.
func TestMovedResourceHasOneWriterAtATime(t *testing.T) {
	kind := setup(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	known := []string{"a", "b"}
	wa, wb := &writes{}, &writes{}
	if err := testop.StartShard(ctx, cluster.Config, scheme, []*render.Kind{kind}, shard.Shards{Name: "a", Known: known}, wa.wrap); err != nil {
		t.Fatal(err)
	}
	if err := testop.StartShard(ctx, cluster.Config, scheme, []*render.Kind{kind}, shard.Shards{Name: "b", Known: known}, wb.wrap); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "moved"}}); err != nil {
		t.Fatal(err)
	}
	w := &testv1alpha1.Widget{
		ObjectMeta: metav1.ObjectMeta{Name: "w-0", Namespace: "moved", Labels: map[string]string{v1alpha1.LabelShard: "a"}},
		Spec:       testv1alpha1.WidgetSpec{Message: "one", Service: true},
	}
	if err := k8s.Create(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, "Ready, claimed by a", readyAndClaimed(t, w, "a"))

	wa.mu.Lock()
	wa.slow, wa.delay = "/w-0", 3*time.Second
	wa.mu.Unlock()
	patch := func(p string) {
		t.Helper()
		if err := k8s.Patch(t.Context(), w, client.RawPatch(types.MergePatchType, []byte(p))); err != nil {
			t.Fatal(err)
		}
	}
	held := len(wa.of("/w-0"))
	patch(`{"spec":{"message":"two"}}`)
	testutil.Eventually(t, 30*time.Second, "a reconciling, its write held back", func() error {
		for _, s := range wa.of("/w-0")[held:] {
			if s.end.IsZero() {
				return nil
			}
		}
		return fmt.Errorf("no write of a's in flight")
	})
	// Moved, and no longer rendering its Service: b must prune an object
	// that still carries a's label, which b's cache does not hold.
	patch(`{"metadata":{"labels":{"stencil.dev/shard":"b"}},"spec":{"service":false}}`)
	testutil.Eventually(t, time.Minute, "Ready, claimed by b", readyAndClaimed(t, w, "b"))

	testutil.Eventually(t, 30*time.Second, "the Service pruned by b, the ConfigMap labelled b", func() error {
		if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: "moved", Name: "w-0"}, &corev1.Service{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Service: %w", err)
		}
		cm := &corev1.ConfigMap{}
		if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: "moved", Name: "w-0-config"}, cm); err != nil {
			return err
		}
		if cm.Labels[v1alpha1.LabelShard] != "b" {
			return fmt.Errorf("ConfigMap labels %v", cm.Labels)
		}
		return nil
	})
	// a's held-back writes end (two, one after the other, if it sent any):
	// none in flight, and none begun or ended for longer than the hold.
	testutil.Eventually(t, time.Minute, "a's writes ended", func() error {
		var last time.Time
		for _, s := range wa.of("/w-0") {
			if s.end.IsZero() {
				return fmt.Errorf("a's write of %s in flight since %s", s.path, s.start.Format("15:04:05.000"))
			}
			if s.end.After(last) {
				last = s.end
			}
		}
		if quiet := time.Since(last); quiet < 4*time.Second {
			return fmt.Errorf("a's last write ended %s ago", quiet.Round(time.Millisecond))
		}
		return nil
	})
	aSpans, bSpans := wa.of("/w-0"), wb.of("/w-0")
	if len(aSpans) == 0 || len(bSpans) == 0 {
		t.Fatalf("writes of a %d, of b %d: want both", len(aSpans), len(bSpans))
	}
	for _, s := range aSpans {
		t.Logf("a %s %s–%s rv %d", s.path, s.start.Format("05.000"), s.end.Format("05.000"), s.rv)
	}
	for _, s := range bSpans {
		t.Logf("b %s %s–%s rv %d", s.path, s.start.Format("05.000"), s.end.Format("05.000"), s.rv)
	}
	var lastA time.Time
	for _, s := range aSpans {
		end := s.end
		if end.IsZero() {
			end = time.Now() // still in flight
		}
		if end.After(lastA) {
			lastA = end
		}
	}
	firstB := bSpans[0].start
	t.Logf("a wrote %d times, the last ending %s; b's first write began %s later", len(aSpans), lastA.Format("15:04:05.000"), firstB.Sub(lastA).Round(time.Millisecond))
	// a's writes all precede b's first: in the API server's order when both
	// were stored (resourceVersions; b may start the moment the server
	// stored a's last write, before a's client has read the answer), else
	// by the clock.
	for _, s := range aSpans {
		end := s.end
		if end.IsZero() {
			end = time.Now()
		}
		switch {
		case s.rv != 0 && bSpans[0].rv != 0:
			if s.rv > bSpans[0].rv {
				t.Errorf("a's write of %s (resourceVersion %d) was stored after b's first write of %s (%d): two writers at once", s.path, s.rv, bSpans[0].path, bSpans[0].rv)
			}
		case firstB.Before(end):
			t.Errorf("b wrote (%s) before a's write of %s ended (%s): two writers at once", bSpans[0].path, s.path, end.Format("15:04:05.000"))
		}
	}
	for shard, want := range map[string]float64{"a": 0, "b": 1} {
		if got := claimedGauge(t, shard); got != want {
			t.Errorf("stencil_claimed_resources{kind=Widget,shard=%s} = %v, want %v", shard, got, want)
		}
	}
	bin, err := localcluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), filepath.Join(bin, "kubectl"), "-n", "moved", "get", "widgets", "-o", "wide")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SHARD") || !strings.HasSuffix(strings.TrimSpace(string(out)), " b") {
		t.Errorf("kubectl get widgets -o wide: %v\n%s", err, out)
	}
	t.Logf("$ kubectl get widgets -o wide\n%s", out)
}

// claimedGauge reads stencil_claimed_resources for Widgets of shard from
// this process's registry (both shards run in it).
func claimedGauge(t *testing.T, shard string) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "stencil_claimed_resources" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["kind"] == "Widget" && labels["shard"] == shard {
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}
