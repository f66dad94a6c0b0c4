// Command decobench measures what a decorator costs (`make
// bench-decorators`), in two modes.
//
// Its cache of observed objects (-pods): on a local control plane (API
// server and etcd only: no controller makes or changes pods) it creates -rs
// ReplicaSets and -pods pods that carry their template labels, starts
// stencil's decorators in this process, waits until every ReplicaSet has
// its pod-count label, and prints the Go heap the decorators added; then
// it fills a cache of whole pods, as a controller that caches the pods it
// lists (seed 004's) would hold them, and prints what that adds.
//
// Its scope (-scale): bin/stencil against -scale ReplicaSets, with
// replicaset-podcount off, scoped and on everywhere (see scale.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/internal/dev/localcluster"
	"github.com/stencil-operator/stencil/internal/testing/samples"
	"github.com/stencil-operator/stencil/internal/testing/testutil/testop"
	"github.com/stencil-operator/stencil/render"
)

func main() {
	replicaSets := flag.Int("rs", 20, "ReplicaSets, in the observed objects' mode.")
	pods := flag.Int("pods", 2000, "Pods, spread evenly over the ReplicaSets; 0 skips the observed objects' mode.")
	scale := flag.Int("scale", 0, "ReplicaSets of the scale mode (a multiple of 100; needs bin/stencil); 0 skips it.")
	flag.Parse()
	ctrl.SetLogger(logr.Discard())
	if err := runModes(*replicaSets, *pods, *scale); err != nil {
		fmt.Fprintln(os.Stderr, "decobench:", err)
		os.Exit(1)
	}
}

// runModes runs the modes the flags turn on, the observed objects' mode
// first, within 30 minutes; it stops at the first that fails.
func runModes(replicaSets, pods, scale int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	if pods > 0 {
		if err := run(ctx, replicaSets, pods); err != nil {
			return err
		}
	}
	if scale > 0 {
		if err := runScale(ctx, scale); err != nil {
			return err
		}
	}
	return nil
}

func run(ctx context.Context, replicaSets, pods int) error {
	cluster, err := localcluster.Start(ctx, localcluster.Options{APIServerOnly: true})
	if err != nil {
		return err
	}
	defer func() { _ = cluster.Stop() }()
	scheme := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	cfg := cluster.Config
	cfg.QPS, cfg.Burst = 1000, 1000
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	if err := create(ctx, c, replicaSets, pods); err != nil {
		return err
	}
	before := heap()
	decorators, err := samples.LoadDecorators()
	if err != nil {
		return err
	}
	start := time.Now()
	var podCount []*render.Decorator
	for _, d := range decorators {
		if d.Name() == "replicaset-podcount" {
			podCount = append(podCount, d)
		}
	}
	if err := testop.StartWithDecorators(ctx, cfg, scheme, nil, podCount, nil); err != nil {
		return err
	}
	if err := labelled(ctx, c, replicaSets, fmt.Sprint(pods/replicaSets)); err != nil {
		return err
	}
	decorated := heap()
	fmt.Printf("%d ReplicaSets, %d pods: every pod-count label right %s after start\n", replicaSets, pods, time.Since(start).Round(time.Millisecond))
	fmt.Printf("heap added by stencil's decorators (pods metadata-only, without managedFields): %s (%s per pod)\n", mib(decorated-before), kib((decorated-before)/int64(pods)))

	whole, err := cache.New(cfg, cache.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	go func() { _ = whole.Start(ctx) }()
	if !whole.WaitForCacheSync(ctx) {
		return fmt.Errorf("the cache of whole pods did not start")
	}
	list := &corev1.PodList{}
	if err := whole.List(ctx, list); err != nil { // starts the informer and waits for its sync
		return err
	}
	full := heap()
	fmt.Printf("heap a cache of whole pods adds (as seed 004's controller holds them): %s (%s per pod)\n", mib(full-decorated), kib((full-decorated)/int64(pods)))
	runtime.KeepAlive(list)
	return nil
}

// create makes the ReplicaSets and pods: ReplicaSet rs-<i> and its pods
// labelled app=rs-<i>.
func create(ctx context.Context, c client.Client, replicaSets, pods int) error {
	const ns = "default"
	// No controller-manager makes the namespace's ServiceAccount, which
	// the API server requires of a pod.
	if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}); err != nil {
		return err
	}
	for i := range replicaSets {
		labels := map[string]string{"app": fmt.Sprintf("rs-%d", i)}
		rs := &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: labels["app"], Namespace: ns},
			Spec: appsv1.ReplicaSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: podSpec()},
			},
		}
		if err := c.Create(ctx, rs); err != nil {
			return err
		}
	}
	errs := make(chan error, pods)
	sem := make(chan struct{}, 32)
	for i := range pods {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", i), Namespace: ns, Labels: map[string]string{"app": fmt.Sprintf("rs-%d", i%replicaSets), "tier": "web"}},
				Spec:       podSpec(),
			}
			errs <- c.Create(ctx, pod)
		}()
	}
	var all []error
	for range pods {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

func podSpec() corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27", Ports: []corev1.ContainerPort{{ContainerPort: 80}}}}}
}

// labelled waits until every ReplicaSet has pod-count=want.
func labelled(ctx context.Context, c client.Client, replicaSets int, want string) error {
	for {
		list := &appsv1.ReplicaSetList{}
		if err := c.List(ctx, list); err != nil {
			return err
		}
		n := 0
		for _, rs := range list.Items {
			if rs.Labels["pod-count"] == want {
				n++
			}
		}
		if n == replicaSets {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d ReplicaSets labelled pod-count=%s: %w", n, replicaSets, want, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// heap is the live heap after a full collection.
func heap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
func kib(b int64) string { return fmt.Sprintf("%.2f KiB", float64(b)/(1<<10)) }
