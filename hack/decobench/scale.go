package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/internal/dev/localcluster"
	"github.com/stencil-operator/stencil/internal/testing/testutil"
)

// The scale mode: n ReplicaSets of no replicas (no pods: pods' cost is the
// first mode's) in namespaces of perNamespace, the first namespace
// labelled stencil.dev/podcount=on and its ReplicaSets podcount=on. The
// real bin/stencil runs against them in turn: with its decorators off (the
// default), replicaset-podcount scoped by a namespace selector to that
// namespace, scoped by an object selector to its ReplicaSets, and enabled
// on every ReplicaSet; then off again over the labels it left, and
// disabled (removing them). Each run is measured on its own: the time
// until every ReplicaSet in scope is labelled (or every label removed),
// the operator's requests by verb, its Go heap after a collection, and its
// resident memory (now and at its peak).
const perNamespace = 100

// scaleRun is one run of the operator in the scale mode.
type scaleRun struct {
	name  string
	flags []string
	// want is how many ReplicaSets it labels; release: how many labels it
	// removes; off: it writes nothing (measured after a while).
	want, release int
	off           bool
	// after is how many ReplicaSets are labelled pod-count after it.
	after int
}

func runScale(ctx context.Context, n int) error {
	if n < perNamespace || n%perNamespace != 0 {
		return fmt.Errorf("-scale %d: want a multiple of %d", n, perNamespace)
	}
	bin, err := localcluster.BinDir()
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(bin, "stencil")); err != nil {
		return fmt.Errorf("bin/stencil (make build): %w", err)
	}
	cluster, err := localcluster.Start(ctx, localcluster.Options{APIServerOnly: true})
	if err != nil {
		return err
	}
	defer func() { _ = cluster.Stop() }()
	scheme := k8sruntime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), apiextensionsv1.AddToScheme(scheme)); err != nil {
		return err
	}
	cfg := cluster.Config
	cfg.QPS, cfg.Burst = 1000, 1000
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	root := filepath.Dir(bin)
	if err := testutil.InstallCRDs(ctx, c, os.DirFS(filepath.Join(root, "config/crd/bases"))); err != nil {
		return err
	}
	start := time.Now()
	if err := createReplicaSets(ctx, c, n); err != nil {
		return err
	}
	fmt.Printf("\n%d ReplicaSets in %d namespaces (no pods), created in %s; replicaset-podcount's scope: namespace bench-000 (%d ReplicaSets).\n",
		n, n/perNamespace, time.Since(start).Round(time.Second), perNamespace)
	const podCount = "--decorators=replicaset-podcount"
	runs := []scaleRun{
		{name: "off (the default)", off: true},
		{name: "namespace selector", flags: []string{podCount, "--decorator-namespace-selector=replicaset-podcount=stencil.dev/podcount=on"}, want: perNamespace, after: perNamespace},
		{name: "(disabled: removing its labels)", flags: []string{"--disable-decorator=replicaset-podcount"}, release: perNamespace},
		{name: "object selector", flags: []string{podCount, "--decorator-object-selector=replicaset-podcount=podcount=on"}, want: perNamespace, after: perNamespace},
		{name: "(disabled: removing its labels)", flags: []string{"--disable-decorator=replicaset-podcount"}, release: perNamespace},
		{name: "every ReplicaSet", flags: []string{podCount}, want: n, after: n},
		{name: "off, over its labels", off: true, after: n},
		{name: "disabled: removing its labels", flags: []string{"--disable-decorator=replicaset-podcount"}, release: n},
	}
	fmt.Printf("| replicaset-podcount | in scope | labelled (or removed) after | PATCH | POST | GET (list, get) | heap | RSS | peak RSS |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		res, err := runOperator(ctx, bin, cluster.Kubeconfig, r)
		if err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
		if err := checkLabelled(ctx, c, r); err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
		fmt.Println(res)
	}
	return nil
}

// createReplicaSets makes n ReplicaSets of no replicas, perNamespace in
// each namespace bench-<i>; the first namespace and its ReplicaSets carry
// the labels the scoped runs select.
func createReplicaSets(ctx context.Context, c client.Client, n int) error {
	errs := make(chan error, n)
	sem := make(chan struct{}, 32)
	zero := int32(0)
	for i := range n / perNamespace {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%03d", i)}}
		var rsLabels map[string]string
		if i == 0 {
			ns.Labels = map[string]string{"stencil.dev/podcount": "on"}
			rsLabels = map[string]string{"podcount": "on"}
		}
		if err := c.Create(ctx, ns); err != nil {
			return err
		}
		for j := range perNamespace {
			sem <- struct{}{}
			go func() {
				defer func() { <-sem }()
				sel := map[string]string{"app": fmt.Sprintf("rs-%d", j)}
				rs := &appsv1.ReplicaSet{
					ObjectMeta: metav1.ObjectMeta{Name: sel["app"], Namespace: ns.Name, Labels: rsLabels},
					Spec: appsv1.ReplicaSetSpec{
						Replicas: &zero,
						Selector: &metav1.LabelSelector{MatchLabels: sel},
						Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: podSpec()},
					},
				}
				errs <- c.Create(ctx, rs)
			}()
		}
	}
	var all []error
	for range n {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// runOperator runs bin/stencil with r's flags until r is done, measures it
// and stops it.
func runOperator(ctx context.Context, bin, kubeconfig string, r scaleRun) (string, error) {
	ports, err := freeAddresses(3)
	if err != nil {
		return "", err
	}
	metrics, probe, pprof := ports[0], ports[1], ports[2]
	args := append([]string{"--metrics-bind-address=" + metrics, "--health-probe-bind-address=" + probe, "--pprof-bind-address=" + pprof}, r.flags...)
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "stencil"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	logs, err := os.CreateTemp("", "decobench-stencil-*.log")
	if err != nil {
		return "", err
	}
	defer func() { _ = logs.Close(); _ = os.Remove(logs.Name()) }()
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return "", err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	scrape := func() (map[string]float64, error) { return scrapeMetrics(ctx, "http://"+metrics+"/metrics") }
	took, err := awaitScaleRun(ctx, r, probe, scrape, start)
	if err != nil {
		return "", err
	}
	m, err := scrape()
	if err != nil {
		return "", err
	}
	heap, err := heapAlloc(ctx, "http://"+pprof+"/debug/pprof/heap?gc=1&debug=1")
	if err != nil {
		return "", err
	}
	rss, peak, err := residentMemory(cmd.Process.Pid)
	if err != nil {
		return "", err
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	stopped = true
	return scaleRow(r, m, took, heap, rss, peak), nil
}

// awaitScaleRun waits until the operator started at start has done r's
// work, and returns how long that took (0 for a run with the decorator
// off, which has nothing to wait for but the leftover report: it waits
// until the operator is ready, at probe, and then a while). scrape reads
// the operator's metrics.
func awaitScaleRun(ctx context.Context, r scaleRun, probe string, scrape func() (map[string]float64, error), start time.Time) (time.Duration, error) {
	var took time.Duration
	switch {
	case r.off:
		// Nothing to wait for but the leftover report: ready, then a while.
		if err := poll(ctx, time.Minute, func() error { return get(ctx, "http://"+probe+"/readyz", nil) }); err != nil {
			return 0, fmt.Errorf("not ready: %w", err)
		}
		time.Sleep(10 * time.Second)
	default:
		metric, want := `stencil_decorated_objects{kind="replicaset-podcount"}`, float64(r.want)
		if r.release > 0 {
			metric, want = `stencil_applied_objects_total{kind="replicaset-podcount"}`, float64(r.release)
		}
		err := poll(ctx, 8*time.Minute, func() error {
			m, err := scrape()
			if err != nil {
				return err
			}
			if m[metric] < want {
				return fmt.Errorf("%s %v of %v", metric, m[metric], want)
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
		took = time.Since(start)
		time.Sleep(3 * time.Second) // what follows, if anything, is counted too
	}
	return took, nil
}

// scaleRow is r's row of the results table: its metrics m at the end, how
// long it took, and the operator's heap and resident memory (now and at
// its peak).
func scaleRow(r scaleRun, m map[string]float64, took time.Duration, heap, rss, peak int64) string {
	var report string
	if r.off {
		report = fmt.Sprintf("leftovers reported: %v", m[`stencil_decorator_leftover_objects{kind="replicaset-podcount"}`])
	}
	inScope, after := fmt.Sprint(r.want), took.Round(100*time.Millisecond).String()
	switch {
	case r.release > 0:
		inScope = fmt.Sprintf("%d removed", r.release)
	case r.off:
		inScope, after = "0", report
	}
	return fmt.Sprintf("| %s | %s | %s | %.0f | %.0f | %.0f | %s | %s | %s |", r.name, inScope, after,
		m[`rest_client_requests_total/PATCH`], m[`rest_client_requests_total/POST`], m[`rest_client_requests_total/GET`], mib(heap), mib(rss), mib(peak))
}

// checkLabelled: after run r, the API server shows its labels (or none).
func checkLabelled(ctx context.Context, c client.Client, r scaleRun) error {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("ReplicaSetList"))
	if err := c.List(ctx, list, client.HasLabels{"pod-count"}); err != nil {
		return err
	}
	if len(list.Items) != r.after {
		return fmt.Errorf("%d ReplicaSets labelled pod-count, want %d", len(list.Items), r.after)
	}
	return nil
}

// poll calls check until it returns nil, for at most within.
func poll(ctx context.Context, within time.Duration, check func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func get(ctx context.Context, url string, into io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	if into != nil {
		_, err = io.Copy(into, resp.Body)
	}
	return err
}

var sample = regexp.MustCompile(`^([a-z_]+)(\{[^}]*\})? ([0-9.e+-]+)$`)

// scrapeMetrics reads a Prometheus text endpoint: each sample by
// name{labels}, and rest_client_requests_total summed by method as
// rest_client_requests_total/<METHOD>.
func scrapeMetrics(ctx context.Context, url string) (map[string]float64, error) {
	var body strings.Builder
	if err := get(ctx, url, &body); err != nil {
		return nil, err
	}
	out := map[string]float64{}
	method := regexp.MustCompile(`method="([A-Z]+)"`)
	for line := range strings.Lines(body.String()) {
		m := sample.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			continue
		}
		out[m[1]+m[2]] = v
		if mm := method.FindStringSubmatch(m[2]); m[1] == "rest_client_requests_total" && mm != nil {
			out[m[1]+"/"+mm[1]] += v
		}
	}
	return out, nil
}

// heapAlloc is the Go heap in use after a collection, from a heap profile
// in text (debug=1, gc=1).
func heapAlloc(ctx context.Context, url string) (int64, error) {
	var body strings.Builder
	if err := get(ctx, url, &body); err != nil {
		return 0, err
	}
	for line := range strings.Lines(body.String()) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "# HeapAlloc = "); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("no HeapAlloc in %s", url)
}

// residentMemory is a process's resident memory and its peak, in bytes.
func residentMemory(pid int) (rss, peak int64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) != 3 || fields[2] != "kB" {
			continue
		}
		kb, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			peak = kb << 10
		}
	}
	if rss == 0 || peak == 0 {
		return 0, 0, fmt.Errorf("no VmRSS or VmHWM for process %d", pid)
	}
	return rss, peak, s.Err()
}

// freeAddresses are n free local TCP addresses.
func freeAddresses(n int) ([]string, error) {
	var out []string
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, l)
		out = append(out, l.Addr().String())
	}
	return out, nil
}
