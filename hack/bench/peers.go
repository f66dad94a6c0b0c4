package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/internal/testutil"
)

// Peers (`make bench-peers`, flag -peers): for each N, one run each of the
// raw + status floor, stencil and kro, one after another, each on a fresh
// control plane, with the same MyWebs. kro is built from the module pinned
// in hack/tools/kro and drives the ResourceGraphDefinition
// hack/bench/peers/kro-myweb.yaml, whose kind KroWeb has MyWeb's spec.
// kro runs twice: with the flags its Helm chart ships (1 worker, 100
// requests per second) and with stencil's (8 workers, 500 per second).

// kroGVK is the kind the ResourceGraphDefinition defines.
var kroGVK = schema.GroupVersionKind{Group: "kro.run", Version: "v1alpha1", Kind: "KroWeb"}

// kroRGD is the ResourceGraphDefinition, relative to the repository root.
const kroRGD = "hack/bench/peers/kro-myweb.yaml"

// kroSettings are the two ways kro is run: its chart's defaults, and
// stencil's concurrency and client limits.
var kroSettings = []struct {
	name string
	args []string
}{
	{"kro (chart defaults)", nil},
	{"kro (stencil's limits)", []string{"--dynamic-controller-concurrent-reconciles=8", "--client-qps=500", "--client-burst=1000"}},
}

// peerRow is one N: every contender's result.
type peerRow struct {
	N       int       `json:"n"`
	Results []*result `json:"results"`
}

func runPeers(ctx context.Context, cfg config, bins programs) error {
	kro := filepath.Join(cfg.bin, "kro")
	if _, err := os.Stat(kro); err != nil {
		return fmt.Errorf("kro is not built (`PEERS=1 hack/tools/install.sh` builds it): %w", err)
	}
	crds, err := kroCRDs(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("stencil bench, peers: N = %v MyWebs in %d namespaces; one run each, a fresh etcd + kube-apiserver for each run%s.\n\n", cfg.sizes, cfg.namespaces, pinNote())
	var rows []peerRow
	for _, n := range cfg.sizes {
		row := peerRow{N: n}
		floor, err := measureRaw(ctx, cfg, n, bins, true)
		if err != nil {
			return fmt.Errorf("raw loop + status, N=%d: %w", n, err)
		}
		printRun(floor)
		st, err := measureStencil(ctx, cfg, n, false)
		if err != nil {
			return fmt.Errorf("stencil, N=%d: %w", n, err)
		}
		printRun(st)
		row.Results = append(row.Results, floor, st)
		for _, s := range kroSettings {
			r, err := measureKro(ctx, cfg, n, kro, crds, s.name, s.args)
			if err != nil {
				return fmt.Errorf("%s, N=%d: %w", s.name, n, err)
			}
			printRun(r)
			row.Results = append(row.Results, r)
		}
		rows = append(rows, row)
	}
	table := peersTable(rows)
	fmt.Print(table)
	return writePeers(cfg.out, rows, table)
}

// kroCRDs is the folder of kro's own CRDs in the pinned module.
func kroCRDs(ctx context.Context) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/kubernetes-sigs/kro")
	cmd.Dir = "hack/tools/kro"
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("finding kro's module: %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "helm", "crds"), nil
}

// measureKro: the ResourceGraphDefinition is made active by a first kro
// process, which then stops; the KroWebs are created; the clock runs from
// starting a second kro process until every KroWeb is ACTIVE, as stencil's
// runs from its start with the MyWebs in place.
func measureKro(ctx context.Context, cfg config, n int, bin, crds, name string, args []string) (_ *result, err error) {
	e, err := startEnv(ctx, cfg, "kro")
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, e.stop()) }()
	if err := testutil.InstallCRDs(ctx, e.admin, os.DirFS(crds)); err != nil {
		return nil, fmt.Errorf("installing kro's CRDs: %w", err)
	}
	if err := defineKroWeb(ctx, cfg, e, bin); err != nil {
		return nil, err
	}
	if err := createAll(ctx, e.admin, kroWebs(n, cfg.namespaces)); err != nil {
		return nil, fmt.Errorf("creating KroWebs: %w", err)
	}
	w, err := startActiveWatcher(ctx, e, n)
	if err != nil {
		return nil, err
	}
	defer w.cancel()
	controlPlane, steal := e.controlPlaneCPU(), stealSeconds()
	op, err := startProgram(ctx, e, bin, kroArgs(args), "kro.log")
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, op.stop()) }()
	converged, err := w.wait(ctx, op)
	if err != nil {
		return nil, err
	}
	r := &result{Contender: name, N: n, Converge: converged.Sub(op.started), StealSeconds: stealSeconds() - steal}
	r.ControlPlaneCPUSeconds = e.controlPlaneCPU() - controlPlane
	if r.CPUSeconds, err = op.cpuSeconds(); err != nil {
		return nil, err
	}
	r.ConvergeCPUSeconds = r.CPUSeconds
	if r.Requests, err = countRequests(e.auditLog, "kro", op.started, converged); err != nil {
		return nil, err
	}
	if err := countRendered(ctx, e.admin, n); err != nil {
		return nil, err
	}
	r.PeakRSSKiB, r.FileRSSKiB, err = op.memory()
	return r, err
}

// kroArgs are kro's flags: no metrics or health listener (the bench reads
// neither), then args.
func kroArgs(args []string) []string {
	return append([]string{"--metrics-bind-address=0", "--health-probe-bind-address=0"}, args...)
}

// defineKroWeb creates the ResourceGraphDefinition and runs kro until the
// KroWeb CRD it generates is established.
func defineKroWeb(ctx context.Context, cfg config, e *env, bin string) (err error) {
	data, err := os.ReadFile(kroRGD)
	if err != nil {
		return err
	}
	rgd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &rgd.Object); err != nil {
		return fmt.Errorf("%s: %w", kroRGD, err)
	}
	if err := e.admin.Create(ctx, rgd); err != nil {
		return fmt.Errorf("creating the ResourceGraphDefinition: %w", err)
	}
	op, err := startProgram(ctx, e, bin, kroArgs(nil), "kro-define.log")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, op.stop()) }()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
		if err := op.failed(); err != nil {
			return err
		}
		if e.admin.Get(ctx, types.NamespacedName{Name: "krowebs.kro.run"}, crd) == nil && established(crd) {
			// The API server serves a new CRD a moment after it is established.
			return probeKroWeb(ctx, e.admin)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("kro did not define KroWeb within 2 minutes; its log: %s", op.logPath)
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// probeKroWeb waits until the API server takes a KroWeb (a dry run).
func probeKroWeb(ctx context.Context, c client.Client) error {
	var err error
	for range 100 {
		if err = c.Create(ctx, kroWebs(1, 1)[0], client.DryRunAll); err == nil {
			return nil
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("the API server does not take a KroWeb: %w", err)
}

// kroWebs are the MyWebs of myWebs as KroWebs.
func kroWebs(n, namespaces int) []*unstructured.Unstructured {
	webs := myWebs(n, namespaces)
	out := make([]*unstructured.Unstructured, len(webs))
	for i, w := range webs {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
			"image": w.Spec.Image, "nodePortNumber": int64(w.Spec.NodePortNumber), "pageContentHtml": w.Spec.PageContentHtml,
		}}}
		u.SetGroupVersionKind(kroGVK)
		u.SetNamespace(w.Namespace)
		u.SetName(w.Name)
		out[i] = u
	}
	return out
}

// countRendered checks that the n webs' objects exist: a ConfigMap, a
// Deployment and a Service each, with MyWeb's labels.
func countRendered(ctx context.Context, c client.Client, n int) error {
	for _, kind := range []string{"ConfigMap", "Deployment", "Service"} {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: kind + "List"})
		if kind == "Deployment" {
			l.SetAPIVersion("apps/v1")
		}
		if err := c.List(ctx, l, client.MatchingLabels{"app.kubernetes.io/name": "myweb"}); err != nil {
			return err
		}
		if len(l.Items) != n {
			return fmt.Errorf("%ss: %d, want %d", kind, len(l.Items), n)
		}
	}
	return nil
}

// activeWatcher tells, from a watch as the admin user, when every one of n
// KroWebs has status.state ACTIVE.
type activeWatcher struct {
	cancel context.CancelFunc
	mu     sync.Mutex
	active map[types.NamespacedName]bool
	count  int // of the ACTIVE ones
	n      int
	all    chan time.Time
}

func startActiveWatcher(ctx context.Context, e *env, n int) (*activeWatcher, error) {
	ctx, cancel := context.WithCancel(ctx)
	c, err := cache.New(e.adminConfig(), cache.Options{Scheme: e.scheme})
	if err != nil {
		cancel()
		return nil, err
	}
	w := &activeWatcher{cancel: cancel, active: map[types.NamespacedName]bool{}, n: n, all: make(chan time.Time, 1)}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(kroGVK)
	informer, err := c.GetInformer(ctx, u)
	if err == nil {
		_, err = informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    w.changed,
			UpdateFunc: func(_, obj any) { w.changed(obj) },
		})
	}
	if err != nil {
		cancel()
		return nil, err
	}
	if err := startCache(ctx, cancel, c, "KroWebs"); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *activeWatcher) changed(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	state, _, _ := unstructured.NestedString(u.Object, "status", "state")
	w.mu.Lock()
	defer w.mu.Unlock()
	key, active := types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}, state == "ACTIVE"
	switch was := w.active[key]; {
	case active && !was:
		w.count++
	case !active && was:
		w.count--
	}
	w.active[key] = active
	if w.count == w.n {
		select {
		case w.all <- time.Now():
		default:
		}
	}
}

// wait returns when every KroWeb is ACTIVE.
func (w *activeWatcher) wait(ctx context.Context, op *operator) (time.Time, error) {
	return waitConverged(ctx, w.all, op, "every KroWeb is ACTIVE")
}

// peersTable is the Markdown table of every contender at every N.
func peersTable(rows []peerRow) string {
	var b strings.Builder
	b.WriteString("| N | contender | converge | × raw + status | requests | CPU | API server + etcd CPU | peak RSS |\n|---|---|---|---|---|---|---|---|\n")
	for _, row := range rows {
		floor := row.Results[0]
		for _, r := range row.Results {
			fmt.Fprintf(&b, "| %d | %s | %s | %.2f× | %d | %.2f s | %.2f s | %s |\n", row.N, r.Contender, elapsed(r.Converge),
				r.Converge.Seconds()/floor.Converge.Seconds(), r.Requests.total(), r.CPUSeconds, r.ControlPlaneCPUSeconds, mib(r.PeakRSSKiB))
		}
	}
	return b.String()
}

func writePeers(dir string, rows []peerRow, table string) error {
	js, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return err
	}
	var md bytes.Buffer
	fmt.Fprintf(&md, "Measured %s with Go %s on %d CPUs (`make bench-peers`)%s, one run each.\n\n", time.Now().UTC().Format("2006-01-02"), runtime.Version(), runtime.NumCPU(), pinNote())
	md.WriteString(table)
	fmt.Fprintln(&md, "\nRequests while converging, by verb and resource (from the API server's audit log):")
	fmt.Fprintln(&md)
	for _, row := range rows {
		for _, r := range row.Results {
			fmt.Fprintf(&md, "- %s, N = %d: %s\n", r.Contender, r.N, r.Requests)
		}
	}
	svg, err := plotPeers(rows)
	if err != nil {
		return err
	}
	return writeFiles(dir, map[string][]byte{"results.json": append(js, '\n'), "results.md": md.Bytes(), "converge.svg": svg})
}
