package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1 "github.com/stencil-operator/stencil/api/operator/v1"
	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/internal/testing/samples"
)

// convergeTimeout bounds how long a contender may take to converge n
// resources: 15 minutes, and 100 ms more per resource (kro with its chart's
// defaults needs over 10 minutes for 5,000).
func convergeTimeout(n int) time.Duration {
	return 15*time.Minute + time.Duration(n)*100*time.Millisecond
}

// watcher sees, as the admin user, the custom resources and (from the
// drift phase on) the Deployments the contender applies, to tell when it
// has converged and when it has reverted a change.
type watcher struct {
	cache  cache.Cache
	cancel context.CancelFunc
	// watching: the Deployments are watched.
	watching bool

	mu      sync.Mutex
	waiting map[types.NamespacedName]chan observed
	// n resources are expected; ready says which have converged (done).
	done       func(obj any) (types.NamespacedName, bool, bool)
	n          int
	ready      map[types.NamespacedName]bool
	readyCount int
	reported   bool
	allReady   chan time.Time
}

// observed is one version of a Deployment, as the watch delivered it.
type observed struct {
	replicas        int32
	resourceVersion int64
	at              time.Time
}

// webLabels select the objects every contender applies for a MyWeb.
var webLabels = client.MatchingLabels{"app.kubernetes.io/name": "myweb"}

func startWatcher(ctx context.Context, e *env, n int, kind webKind) (*watcher, error) {
	ctx, cancel := context.WithCancel(ctx)
	c, err := cache.New(e.adminConfig(), cache.Options{
		Scheme: e.scheme,
		ByObject: map[client.Object]cache.ByObject{
			&appsv1.Deployment{}: {Label: labels.SelectorFromSet(labels.Set(webLabels))},
		},
	})
	if err != nil {
		cancel()
		return nil, err
	}
	w := &watcher{cache: c, cancel: cancel, waiting: map[types.NamespacedName]chan observed{}, done: doneFunc(kind),
		n: n, ready: map[types.NamespacedName]bool{}, allReady: make(chan time.Time, 1)}
	var watched client.Object = &operatorv1.MyWeb{}
	if !kind.isMyWeb() {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(kind.gvk)
		watched = u
	}
	webs, err := c.GetInformer(ctx, watched)
	if err == nil {
		_, err = webs.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    w.readyChanged,
			UpdateFunc: func(_, obj any) { w.readyChanged(obj) },
		})
	}
	// Watching every kind has the API server set up their watch caches now,
	// as in a cluster where the CRDs are not new; else stencil's first watch
	// of a kind gets "429 storage is (re)initializing" and retries a second
	// later.
	for _, def := range samples.Definitions() {
		if err == nil {
			_, err = c.GetInformer(ctx, def.New())
		}
	}
	if err != nil {
		cancel()
		return nil, err
	}
	if err := startCache(ctx, cancel, c, "MyWebs"); err != nil {
		return nil, err
	}
	return w, nil
}

// startCache starts c and waits until it has synced; on failure it cancels
// ctx (c's) and says what it was watching.
func startCache(ctx context.Context, cancel context.CancelFunc, c cache.Cache, what string) error {
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		cancel()
		return fmt.Errorf("watching %s: %w", what, context.Cause(ctx))
	}
	return nil
}

// watchDeployments starts watching the Deployments, after convergence, so
// that the watch costs the API server nothing while stencil converges. A
// second call does nothing.
func (w *watcher) watchDeployments(ctx context.Context) error {
	if w.watching {
		return nil
	}
	w.watching = true
	deployments, err := w.cache.GetInformer(ctx, &appsv1.Deployment{})
	if err != nil {
		return err
	}
	_, err = deployments.AddEventHandler(toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(_, obj any) { w.seen(obj) }})
	return err
}

func (w *watcher) stop() { w.cancel() }

// doneFunc tells, of an object the watch delivers, its key, whether it
// has converged, and whether it is of the kind at all.
func doneFunc(kind webKind) func(obj any) (types.NamespacedName, bool, bool) {
	if kind.isMyWeb() {
		return func(obj any) (types.NamespacedName, bool, bool) {
			web, ok := obj.(*operatorv1.MyWeb)
			if !ok {
				return types.NamespacedName{}, false, false
			}
			return types.NamespacedName{Namespace: web.Namespace, Name: web.Name}, isReady(web), true
		}
	}
	return func(obj any) (types.NamespacedName, bool, bool) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return types.NamespacedName{}, false, false
		}
		return types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}, kind.converged(u), true
	}
}

// waitAllConverged returns when every one of the n resources has
// converged: a MyWeb Ready for its current generation (see isReady), a
// peer's resource as its kind says.
func (w *watcher) waitAllConverged(ctx context.Context, op *operator) (time.Time, error) {
	return waitConverged(ctx, w.allReady, op, convergeTimeout(w.n), "every "+op.contender.web.gvk.Kind+" has converged")
}

// waitConverged returns the time all sends, unless op exits first or
// timeout passes; what says what was awaited.
func waitConverged(ctx context.Context, all <-chan time.Time, op *operator, within time.Duration, what string) (time.Time, error) {
	timeout := time.After(within)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case at := <-all:
			return at, nil
		case <-tick.C:
			if err := op.failed(); err != nil {
				return time.Time{}, err
			}
		case <-timeout:
			return time.Time{}, fmt.Errorf("not %s within %s; the log: %s", what, within, op.logPath)
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
}

// readyChanged keeps count of the converged resources as the watch
// delivers them, and sends the time when all n are.
func (w *watcher) readyChanged(obj any) {
	key, is, ok := w.done(obj)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	was := w.ready[key]
	w.ready[key] = is
	switch {
	case is && !was:
		w.readyCount++
	case was && !is:
		w.readyCount--
	}
	if w.readyCount == w.n && !w.reported {
		w.reported = true
		w.allReady <- time.Now()
	}
}

// isReady: stencil applied every object of the MyWeb's generation. Its
// Ready is True, or False with reason Progressing because its Deployment is
// not available: the bench's control plane runs no Deployment controller,
// so no Deployment becomes available until measureHealth says so.
func isReady(web *operatorv1.MyWeb) bool {
	c := meta.FindStatusCondition(web.Status.Conditions, v1alpha1.ConditionReady)
	return c != nil && (c.Status == "True" || c.Reason == v1alpha1.ReasonProgressing) && c.ObservedGeneration == web.Generation &&
		web.Status.ObservedGeneration == web.Generation
}

// isHealthy: the MyWeb is Ready, its objects applied and healthy.
func isHealthy(web *operatorv1.MyWeb) bool {
	c := meta.FindStatusCondition(web.Status.Conditions, v1alpha1.ConditionReady)
	return isReady(web) && c.Status == "True"
}

// expect returns the versions of one Deployment that the watch delivers
// from now until done.
func (w *watcher) expect(key types.NamespacedName) <-chan observed {
	ch := make(chan observed, 16)
	w.mu.Lock()
	w.waiting[key] = ch
	w.mu.Unlock()
	return ch
}

func (w *watcher) forget(key types.NamespacedName) {
	w.mu.Lock()
	delete(w.waiting, key)
	w.mu.Unlock()
}

func (w *watcher) seen(obj any) {
	d, ok := obj.(*appsv1.Deployment)
	if !ok || d.Spec.Replicas == nil {
		return
	}
	w.mu.Lock()
	ch := w.waiting[types.NamespacedName{Namespace: d.Namespace, Name: d.Name}]
	w.mu.Unlock()
	if ch == nil {
		return
	}
	rv, _ := strconv.ParseInt(d.ResourceVersion, 10, 64)
	select {
	case ch <- observed{replicas: *d.Spec.Replicas, resourceVersion: rv, at: time.Now()}:
	default:
	}
}

// driftFigures are the latencies from another manager's change of an owned
// field to the watch showing the contender's revert.
type driftFigures struct {
	Changes int           `json:"changes"`
	P50     time.Duration `json:"p50"`
	P99     time.Duration `json:"p99"`
	Max     time.Duration `json:"max"`
	// Missed are the changes not reverted within revertWait; after
	// maxMissed of them the bench makes no more.
	Missed int `json:"missed,omitempty"`
}

// revertWait is how long a revert may take; maxMissed how many changes may
// go unreverted before the bench stops making them (a contender that does
// not watch its objects reverts only on its own schedule, if at all).
const (
	revertWait = 10 * time.Second
	maxMissed  = 3
)

// errNotReverted: the change was not set back within revertWait.
var errNotReverted = fmt.Errorf("not reverted within %s", revertWait)

// measureDrift scales the Deployments of `changes` resources, spread over
// all of webs, one at a time, to 3 replicas as field manager bench-drift,
// and times until the watch shows the contender's revert to the 1 replica
// the template sets.
func measureDrift(ctx context.Context, admin client.Client, w *watcher, webs []client.Object, changes int) (driftFigures, error) {
	if err := w.watchDeployments(ctx); err != nil {
		return driftFigures{}, err
	}
	var f driftFigures
	latencies := make([]time.Duration, 0, changes)
	for i := 0; i < changes && f.Missed < maxMissed; i++ {
		key := client.ObjectKeyFromObject(webs[i*len(webs)/changes])
		d, err := revertTime(ctx, admin, w, key)
		switch {
		case errors.Is(err, errNotReverted):
			f.Missed++
		case err != nil:
			return driftFigures{}, fmt.Errorf("change %d (%s): %w", i+1, key, err)
		default:
			latencies = append(latencies, d)
		}
	}
	f.Changes = len(latencies) + f.Missed
	if len(latencies) == 0 {
		return f, nil
	}
	slices.Sort(latencies)
	f.P50, f.P99, f.Max = percentile(latencies, 50), percentile(latencies, 99), latencies[len(latencies)-1]
	return f, nil
}

func revertTime(ctx context.Context, admin client.Client, w *watcher, key types.NamespacedName) (time.Duration, error) {
	versions := w.expect(key)
	defer w.forget(key)
	d := &appsv1.Deployment{}
	d.Namespace, d.Name = key.Namespace, key.Name
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":3}}`))
	changed := time.Now()
	if err := admin.Patch(ctx, d, patch, client.FieldOwner("bench-drift")); err != nil {
		return 0, err
	}
	changedRV, _ := strconv.ParseInt(d.ResourceVersion, 10, 64)
	timeout := time.After(revertWait)
	for {
		select {
		case v := <-versions:
			if v.resourceVersion > changedRV && v.replicas == 1 {
				return v.at.Sub(changed), nil
			}
		case <-timeout:
			return 0, errNotReverted
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// percentile p of sorted latencies, nearest rank.
func percentile(sorted []time.Duration, p int) time.Duration {
	rank := (p*len(sorted) + 99) / 100
	return sorted[max(rank, 1)-1]
}
