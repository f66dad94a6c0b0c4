package processtest_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
	"github.com/stencil-operator/stencil/internal/testing/testutil"
	"github.com/stencil-operator/stencil/internal/testing/testutil/testop"
	"github.com/stencil-operator/stencil/render"
)

// dryRuns records the paths of a process's server-side dry-run applies.
type dryRuns struct {
	mu    sync.Mutex
	paths []string
}

func (d *dryRuns) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodPatch && req.URL.Query().Get("dryRun") == "All" {
			d.mu.Lock()
			d.paths = append(d.paths, req.URL.Path)
			d.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

// widgetReconciles is the number of Widget reconciles so far, of every
// process this test process ran, whatever their result.
func widgetReconciles(t *testing.T) int {
	t.Helper()
	n := 0.0
	for _, result := range []string{"success", "error", "requeue", "requeue_after"} {
		n += testutil.Metric(t, "controller_runtime_reconcile_total", map[string]string{"controller": "widget", "result": result})
	}
	return int(n)
}

func (d *dryRuns) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.paths...)
}

// TestRestartSendsNoRequestPerConvergedObject: a new process over
// converged Widgets learns their baselines from the live objects, vouched
// for by status.ownedFields, with no dry run; only the Widget whose
// ConfigMap another manager changed while no process ran costs dry runs,
// and that change is set back.
func TestRestartSendsNoRequestPerConvergedObject(t *testing.T) {
	kind := setup(t)
	const ns, n = "restart", 5
	if err := k8s.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	first, stopFirst := context.WithCancel(t.Context())
	defer stopFirst()
	firstStopped, err := testop.RunOperator(first, cluster.Config, scheme, []*render.Kind{kind}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		w := &testv1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("w-%d", i), Namespace: ns},
			Spec: testv1alpha1.WidgetSpec{Message: "m", Replicas: 1, Service: true}}
		if err := k8s.Create(t.Context(), w); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		testutil.Eventually(t, time.Minute, fmt.Sprintf("w-%d Ready, its owned fields recorded", i), func() error {
			w := &testv1alpha1.Widget{}
			if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("w-%d", i)}, w); err != nil {
				return err
			}
			if !meta.IsStatusConditionTrue(w.Status.Conditions, v1alpha1.ConditionReady) || w.Status.ObservedGeneration != w.Generation {
				return fmt.Errorf("not Ready: %+v", w.Status.Conditions)
			}
			if !strings.HasPrefix(w.Status.OwnedFields, "sha256:") {
				return fmt.Errorf("status.ownedFields = %q", w.Status.OwnedFields)
			}
			return nil
		})
	}
	stopFirst()
	waitStopped(t, "the first process", firstStopped)

	// Another manager changes w-2's ConfigMap while no stencil runs.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w-2-config"}}
	if err := k8s.Patch(t.Context(), cm, client.RawPatch(types.MergePatchType, []byte(`{"data":{"message":"changed"}}`)), client.FieldOwner("intruder")); err != nil {
		t.Fatal(err)
	}

	reconciled := widgetReconciles(t)
	runs := &dryRuns{}
	second, stopSecond := context.WithCancel(t.Context())
	defer stopSecond()
	if err := testop.StartOperator(second, cluster.Config, scheme, []*render.Kind{kind}, runs.wrap); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, "w-2's ConfigMap set back", func() error {
		if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(cm), cm); err != nil {
			return err
		}
		if got := cm.Data["message"]; got != "m" {
			return fmt.Errorf("message %q", got)
		}
		return nil
	})
	// Every Widget has been reconciled by the new process (each is queued
	// once its cache has synced), and its reconciles have ended.
	testutil.Eventually(t, time.Minute, "a reconcile of every Widget by the new process", func() error {
		if got := widgetReconciles(t) - reconciled; got < n {
			return fmt.Errorf("%d Widget reconciles, want at least %d", got, n)
		}
		return nil
	})
	testutil.Settle(t, time.Minute, time.Second, "the new process's Widget reconciles", func() int { return widgetReconciles(t) })
	paths := runs.list()
	t.Logf("dry runs of the new process: %q", paths)
	for _, p := range paths {
		if !strings.Contains(p, "/w-2") {
			t.Errorf("dry run of %s, an object of a converged Widget: its baseline should come from status.ownedFields", p)
		}
	}
	if len(paths) == 0 {
		t.Error("no dry run for w-2, whose ConfigMap changed while stencil was down: its recorded owned fields cannot match")
	}
}
