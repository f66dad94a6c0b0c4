package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	stacksv1alpha1 "github.com/stencil-operator/stencil/api/stacks/v1alpha1"
	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/internal/testing/testutil"
)

// Graph (`make bench-graph`, flag -graph): the showcase graph, stencil's
// AppStack (templates/appstack) beside kro driving the same graph
// (hack/bench/peers/kro-appstack.yaml, kind KroAppStack), each N on a fresh
// control plane. Each resource is a password Secret, then a database
// (StatefulSet and Service), then a migration Job once the database is
// ready, then the app (Deployment and Service) once the Job has completed,
// reading a settings ConfigMap of its namespace. The control plane runs no
// controllers: the bench plays them, giving each StatefulSet, Job and
// Deployment the status its controller would write once its pods run (a
// StatefulSet ready, a Job complete, a Deployment available), as soon as it
// sees it, for both contenders alike. Converged: every AppStack Ready, every
// KroAppStack ACTIVE. Requests come from the audit log.

// kroAppStackGVK is the kind kro-appstack.yaml defines.
var kroAppStackGVK = schema.GroupVersionKind{Group: "kro.run", Version: "v1alpha1", Kind: "KroAppStack"}

const kroAppStackRGD = "hack/bench/peers/kro-appstack.yaml"

// graphObjects is the number of objects each resource makes.
const graphObjects = 6

// graphResult is one contender's run at one N.
type graphResult struct {
	Contender string        `json:"contender"`
	N         int           `json:"n"`
	Converge  time.Duration `json:"converge"`
	Requests  requests      `json:"requests"`
	// AtRest are the requests in the quiet window after convergence.
	AtRest      requests      `json:"atRest"`
	QuietWindow time.Duration `json:"quietWindow"`
	CPUSeconds  float64       `json:"cpuSeconds"`
	PeakRSSKiB  int64         `json:"peakRSSKiB"`
	Error       string        `json:"error,omitempty"`
}

func runGraph(ctx context.Context, cfg config) error {
	contenders, err := graphContenders(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Printf("stencil bench, graph: N = %v AppStacks (%d objects each, 4 stages) in %d namespaces; one run each, a fresh etcd + kube-apiserver for each run; the bench plays the StatefulSet, Job and Deployment controllers.\n\n", cfg.sizes, graphObjects, cfg.namespaces)
	var results []*graphResult
	for _, n := range cfg.sizes {
		for _, c := range contenders {
			r, err := measureGraph(ctx, cfg, n, c)
			if err != nil {
				if ctx.Err() != nil {
					return err
				}
				r = &graphResult{Contender: c.name, N: n, Error: err.Error()}
			}
			fmt.Printf("%s, N=%d: %s\n", r.Contender, r.N, graphLine(r))
			results = append(results, r)
			if err := writeGraph(cfg.out, results); err != nil {
				return err
			}
		}
	}
	fmt.Print("\n" + graphTable(results))
	return nil
}

// graphContenders: stencil, stencil with AppStack alone, and kro with its
// chart's defaults and with stencil's limits (-contenders: those named).
func graphContenders(ctx context.Context, cfg config) ([]*contender, error) {
	appStack := webKind{gvk: stacksv1alpha1.GroupVersion.WithKind("AppStack"), converged: func(u *unstructured.Unstructured) bool {
		var conditions []metav1.Condition
		raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		js, _ := json.Marshal(raw)
		_ = json.Unmarshal(js, &conditions)
		ready := meta.FindStatusCondition(conditions, v1alpha1.ConditionReady)
		return ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == u.GetGeneration()
	}}
	s := stencilContender(cfg)
	s.reconciles, s.depth = controllerRuntimeMetrics("appstack")
	s.web = appStack
	contenders := []*contender{s, aloneContender(cfg, "AppStack", appStack)}
	if len(cfg.only) == 0 || slices.ContainsFunc(cfg.only, func(name string) bool { return strings.HasPrefix(name, "kro") }) {
		kros, err := graphKros(ctx, cfg) // else kro need not be built
		if err != nil {
			return nil, err
		}
		contenders = append(contenders, kros...)
	}
	if len(cfg.only) == 0 {
		return contenders, nil
	}
	var kept []*contender
	for _, c := range contenders {
		if slices.Contains(cfg.only, c.name) {
			kept = append(kept, c)
		}
	}
	if len(kept) == 0 {
		return nil, fmt.Errorf("-contenders: none of %v is a graph contender (stencil, stencil (AppStack alone), %s, %s)", cfg.only, kroSettings[0].name, kroSettings[1].name)
	}
	return kept, nil
}

// graphKros are kro with the AppStack graph, with each of kroSettings.
func graphKros(ctx context.Context, cfg config) ([]*contender, error) {
	kro := filepath.Join(cfg.bin, "kro")
	if _, err := os.Stat(kro); err != nil {
		return nil, fmt.Errorf("kro is not built (`PEERS=1 hack/tools/install.sh` builds it): %w", err)
	}
	crds, err := kroCRDs(ctx)
	if err != nil {
		return nil, err
	}
	var out []*contender
	for _, setting := range kroSettings {
		c := kroContender(cfg, kro, crds, setting.name, setting.args)
		c.web.gvk = kroAppStackGVK
		c.web.prepare = func(ctx context.Context, e *env) error {
			if err := testutil.InstallCRDs(ctx, e.admin, os.DirFS(crds)); err != nil {
				return fmt.Errorf("installing kro's CRDs: %w", err)
			}
			return defineKro(ctx, e, kro, kroAppStackRGD, "kroappstacks.kro.run", func() error { return probeAppStack(ctx, e.admin, kroAppStackGVK) })
		}
		out = append(out, c)
	}
	return out, nil
}

// appStacks are the n resources of kind gvk, spread over the namespaces,
// each reading its namespace's settings ConfigMap.
func appStacks(gvk schema.GroupVersionKind, n, namespaces int) []client.Object {
	out := make([]client.Object, n)
	for i := range n {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"version": "1.0.0", "settings": "settings"}}}
		u.SetGroupVersionKind(gvk)
		u.SetNamespace(namespace(i % namespaces))
		u.SetName(fmt.Sprintf("app-%05d", i))
		out[i] = u
	}
	return out
}

func measureGraph(ctx context.Context, cfg config, n int, c *contender) (_ *graphResult, err error) {
	e, err := startEnv(ctx, cfg, c.user)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, e.stop()) }()
	if c.web.prepare != nil {
		if err := c.web.prepare(ctx, e); err != nil {
			return nil, err
		}
	}
	for i := range cfg.namespaces {
		settings := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace(i), Name: "settings"}, Data: map[string]string{"log_level": "info"}}
		if err := e.admin.Create(ctx, settings); err != nil {
			return nil, err
		}
	}
	if err := createAll(ctx, e.admin, appStacks(c.web.gvk, n, cfg.namespaces)); err != nil {
		return nil, fmt.Errorf("creating the %ss: %w", c.web.gvk.Kind, err)
	}
	ctrlCtx, stopControllers := context.WithCancel(ctx)
	defer stopControllers()
	if err := playControllers(ctrlCtx, e); err != nil {
		return nil, err
	}
	w, err := startWatcher(ctx, e, n, c.web)
	if err != nil {
		return nil, err
	}
	defer w.stop()
	op, err := startContender(ctx, e, c, c.user+".log")
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, op.stop()) }()
	converged, err := w.waitAllConverged(ctx, op)
	if err != nil {
		return nil, err
	}
	r := &graphResult{Contender: c.name, N: n, Converge: converged.Sub(op.started)}
	r.CPUSeconds, _ = op.cpuSeconds()
	if err := sleep(ctx, settle); err != nil {
		return nil, err
	}
	quietFrom := time.Now()
	if err := sleep(ctx, cfg.quiet); err != nil {
		return nil, err
	}
	r.QuietWindow = time.Since(quietFrom)
	if r.Requests, err = countRequests(e.auditLog, e.user, op.started, converged); err != nil {
		return nil, err
	}
	if r.AtRest, err = countRequests(e.auditLog, e.user, quietFrom, quietFrom.Add(r.QuietWindow)); err != nil {
		return nil, err
	}
	r.PeakRSSKiB, _, err = op.memory()
	if err != nil {
		return nil, err
	}
	return r, op.failed()
}

// defineKro creates the ResourceGraphDefinition in file and runs kro until
// the CRD it generates (crd) is established and probe, a dry run of one of
// its resources, passes (the API server serves a new CRD a moment after it
// is established).
func defineKro(ctx context.Context, e *env, bin, file, crd string, probe func() error) (err error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	rgd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &rgd.Object); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if err := e.admin.Create(ctx, rgd); err != nil {
		return fmt.Errorf("creating the ResourceGraphDefinition: %w", err)
	}
	op, err := startProgram(ctx, e, bin, kroArgs(nil), "kro-define.log")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, op.stop()) }()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
		if err := op.failed(); err != nil {
			return err
		}
		got := &apiextensionsv1.CustomResourceDefinition{}
		if e.admin.Get(ctx, types.NamespacedName{Name: crd}, got) == nil && established(got) {
			return probe()
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("kro did not establish %s within 2 minutes; its log: %s", crd, op.logPath)
}

// probeAppStack waits until the API server takes a resource of kind gvk
// (a dry run): it serves a new CRD a moment after it is established.
func probeAppStack(ctx context.Context, c client.Client, gvk schema.GroupVersionKind) error {
	var err error
	for range 100 {
		if err = c.Create(ctx, appStacks(gvk, 1, 1)[0], client.DryRunAll); err == nil {
			return nil
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("the API server does not take a %s: %w", gvk.Kind, err)
}

// playControllers gives every StatefulSet, Job and Deployment the status
// its controller would write once its pods run, as soon as the watch shows
// it: ready, complete, available. The bench's own requests: not counted.
func playControllers(ctx context.Context, e *env) error {
	c, err := cache.New(e.adminConfig(), cache.Options{Scheme: e.scheme})
	if err != nil {
		return err
	}
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[controlled]())
	go func() { <-ctx.Done(); queue.ShutDown() }()
	for _, obj := range []client.Object{&appsv1.StatefulSet{}, &batchv1.Job{}, &appsv1.Deployment{}} {
		informer, err := c.GetInformer(ctx, obj)
		if err != nil {
			return err
		}
		kind := fmt.Sprintf("%T", obj)
		enqueue := func(o any) {
			if m, ok := o.(metav1.Object); ok {
				queue.Add(controlled{kind: kind, key: types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()}})
			}
		}
		if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }}); err != nil {
			return err
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	if err := startCache(cctx, cancel, c, "the objects the bench plays the controllers of"); err != nil {
		return err
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				item, shutdown := queue.Get()
				if shutdown {
					return
				}
				if err := markRunning(ctx, c, e.admin, item); err != nil && ctx.Err() == nil {
					queue.AddRateLimited(item)
				} else {
					queue.Forget(item)
				}
				queue.Done(item)
			}
		})
	}
	go func() { <-ctx.Done(); cancel(); wg.Wait() }()
	return nil
}

// controlled is an object whose controller the bench plays.
type controlled struct {
	kind string
	key  types.NamespacedName
}

// markRunning writes the status of item as its controller would once its
// pods run, unless it has it already.
func markRunning(ctx context.Context, r client.Reader, w client.Client, item controlled) error {
	switch item.kind {
	case "*v1.StatefulSet":
		s := &appsv1.StatefulSet{}
		if err := r.Get(ctx, item.key, s); err != nil {
			return client.IgnoreNotFound(err)
		}
		replicas := int32(1)
		if s.Spec.Replicas != nil {
			replicas = *s.Spec.Replicas
		}
		if s.Status.ObservedGeneration == s.Generation && s.Status.ReadyReplicas == replicas {
			return nil
		}
		s.Status = appsv1.StatefulSetStatus{ObservedGeneration: s.Generation, Replicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas,
			CurrentReplicas: replicas, UpdatedReplicas: replicas, CurrentRevision: s.Name + "-1", UpdateRevision: s.Name + "-1"}
		return ignoreGone(w.Status().Update(ctx, s))
	case "*v1.Job":
		j := &batchv1.Job{}
		if err := r.Get(ctx, item.key, j); err != nil {
			return client.IgnoreNotFound(err)
		}
		if j.Status.CompletionTime != nil {
			return nil
		}
		now := metav1.Now()
		j.Status = batchv1.JobStatus{StartTime: &now, CompletionTime: &now, Succeeded: 1, Ready: new(int32(0)), Terminating: new(int32(0)),
			UncountedTerminatedPods: &batchv1.UncountedTerminatedPods{},
			Conditions: []batchv1.JobCondition{
				{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now},
				{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now},
			}}
		return ignoreGone(w.Status().Update(ctx, j))
	case "*v1.Deployment":
		d := &appsv1.Deployment{}
		if err := r.Get(ctx, item.key, d); err != nil {
			return client.IgnoreNotFound(err)
		}
		if d.Status.ObservedGeneration == d.Generation && d.Status.AvailableReplicas > 0 {
			return nil
		}
		markRollout(d, true)
		return ignoreGone(w.Status().Update(ctx, d))
	}
	return nil
}

// ignoreGone: a status write to an object that is gone, or that changed
// meanwhile (the next event brings it back), is no failure.
func ignoreGone(err error) error {
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

func graphLine(r *graphResult) string {
	if r.Error != "" {
		return "failed: " + firstLine(r.Error)
	}
	return fmt.Sprintf("converged in %s, %d requests (%.2f per resource, %.2f per object), %d at rest in %s, CPU %.2f s, peak RSS %s\n    %s",
		elapsed(r.Converge), r.Requests.total(), float64(r.Requests.total())/float64(r.N), float64(r.Requests.total())/float64(r.N*graphObjects),
		r.AtRest.total(), r.QuietWindow.Round(time.Second), r.CPUSeconds, mib(r.PeakRSSKiB), r.Requests)
}

// graphTable is the Markdown table of every run.
func graphTable(results []*graphResult) string {
	var b strings.Builder
	b.WriteString("| N | contender | converge | requests | per resource | at rest | CPU while converging | peak RSS |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		if r.Error != "" {
			fmt.Fprintf(&b, "| %d | %s | failed: %s | | | | | |\n", r.N, r.Contender, strings.ReplaceAll(firstLine(r.Error), "|", "/"))
			continue
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %d | %.2f | %d in %s | %.2f s | %s |\n", r.N, r.Contender, elapsed(r.Converge), r.Requests.total(),
			float64(r.Requests.total())/float64(r.N), r.AtRest.total(), r.QuietWindow.Round(time.Second), r.CPUSeconds, mib(r.PeakRSSKiB))
	}
	b.WriteString("\nRequests by verb and resource:\n\n")
	for _, r := range results {
		if r.Error == "" {
			fmt.Fprintf(&b, "- N = %d, %s: %s\n", r.N, r.Contender, r.Requests)
		}
	}
	return b.String()
}

func writeGraph(dir string, results []*graphResult) error {
	js, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		return err
	}
	return writeFiles(dir, map[string][]byte{
		"results.json": append(js, '\n'),
		"results.md":   []byte("# stencil bench: the graph workload\n\nMeasured at " + revision() + ".\n\n" + graphTable(results)),
	})
}
