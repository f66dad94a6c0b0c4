package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/hack/bench/handwritten"
	"github.com/stencil-operator/stencil/internal/testing/testutil"
)

// Peers (`make bench-peers`, flag -peers): for each N, one run each of the
// raw + status floor and of every operator, one after another, each on a
// fresh control plane, with the same MyWebs (or a peer's kind with MyWeb's
// spec), each measured past convergence (at rest, drift, restart):
//
//   - stencil;
//   - the hand-written MyWeb operator (hack/bench/handwritten), in both its
//     variants: server-side apply of typed apply configurations, and the
//     tutorials' get, then create or update;
//   - kro, built from the module pinned in hack/tools/kro, driving the
//     ResourceGraphDefinition hack/bench/peers/kro-myweb.yaml (kind KroWeb),
//     twice: with the flags its Helm chart ships (1 worker, 100 requests per
//     second) and with stencil's (8 workers, 500 per second);
//   - the operator-sdk Helm operator, when -helm-operator names its binary
//     (docs/benchmarks.md says how to build it), driving the chart
//     hack/bench/peers/helm/myweb for kind HelmWeb, with stencil's 8 workers.

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
	contenders, err := peerContenders(ctx, cfg)
	if err != nil {
		return err
	}
	if len(cfg.only) > 0 {
		for _, name := range cfg.only {
			if !slices.ContainsFunc(contenders, func(c *contender) bool { return c.name == name }) {
				var names []string
				for _, c := range contenders {
					names = append(names, c.name)
				}
				return fmt.Errorf("-contenders: no contender %q (they are: %s)", name, strings.Join(names, ", "))
			}
		}
		contenders = slices.DeleteFunc(contenders, func(c *contender) bool { return !slices.Contains(cfg.only, c.name) })
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
		row.Results = append(row.Results, floor)
		rows = append(rows, row)
		for _, c := range contenders {
			r, err := measureOperator(ctx, cfg, n, c, true)
			if err != nil {
				if ctx.Err() != nil {
					return err
				}
				// One contender's failure (a timeout at large N) is a
				// result too: the others go on.
				r = &result{Contender: c.name, N: n, Error: err.Error()}
			}
			printRun(r)
			rows[len(rows)-1].Results = append(rows[len(rows)-1].Results, r)
			// Written after each contender, so that a long run that stops
			// keeps what it measured.
			if err := writePeers(cfg.out, rows, peersTable(rows)); err != nil {
				return err
			}
		}
	}
	fmt.Print(peersTable(rows))
	return nil
}

// peerContenders are the operators the peers bench runs, in order: stencil,
// stencil with MyWeb alone, the hand-written operator (both variants), kro (both settings) and, when
// its binary is given, the Helm operator.
func peerContenders(ctx context.Context, cfg config) ([]*contender, error) {
	kro := filepath.Join(cfg.bin, "kro")
	if _, err := os.Stat(kro); err != nil {
		return nil, fmt.Errorf("kro is not built (`PEERS=1 hack/tools/install.sh` builds it): %w", err)
	}
	crds, err := kroCRDs(ctx)
	if err != nil {
		return nil, err
	}
	contenders := []*contender{
		stencilContender(cfg),
		aloneContender(cfg, "MyWeb", myWebKindOf),
		handwrittenContender(cfg, handwritten.VariantApply),
		handwrittenContender(cfg, handwritten.VariantGetUpdate),
	}
	for _, s := range kroSettings {
		contenders = append(contenders, kroContender(cfg, kro, crds, s.name, s.args))
	}
	if cfg.helmOperator == "" {
		fmt.Println("The Helm operator is not measured: give its binary with -helm-operator (or $STENCIL_BENCH_HELM_OPERATOR); docs/benchmarks.md says how to build it.")
		return contenders, nil
	}
	if _, err := os.Stat(cfg.helmOperator); err != nil {
		return nil, fmt.Errorf("-helm-operator: %w", err)
	}
	return append(contenders, helmContender(cfg), chartContender(cfg)), nil
}

// kroContender is kro with args, reconciling KroWebs. Its ResourceGraph-
// Definition is made active by a first kro process, which then stops; the
// clock runs from starting a second one until every KroWeb is ACTIVE, as
// stencil's runs from its start with the MyWebs in place.
func kroContender(cfg config, bin, crds, name string, args []string) *contender {
	web := webKind{
		gvk: kroGVK,
		prepare: func(ctx context.Context, e *env) error {
			if err := testutil.InstallCRDs(ctx, e.admin, os.DirFS(crds)); err != nil {
				return fmt.Errorf("installing kro's CRDs: %w", err)
			}
			return defineKroWeb(ctx, cfg, e, bin)
		},
		converged: func(u *unstructured.Unstructured) bool {
			state, _, _ := unstructured.NestedString(u.Object, "status", "state")
			return state == "ACTIVE"
		},
	}
	return &contender{name: name, user: "kro", binary: bin, web: web,
		args: func(metrics, _ string) []string {
			return append([]string{"--metrics-bind-address=" + metrics, "--health-probe-bind-address=0"}, args...)
		},
		reconciles: metric{name: "dynamic_controller_reconcile_total"},
		depth:      metric{name: "dynamic_controller_queue_length"},
	}
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

// kroArgs are kro's flags: no metrics or health listener (the bench reads
// neither), then args.
func kroArgs(args []string) []string {
	return append([]string{"--metrics-bind-address=0", "--health-probe-bind-address=0"}, args...)
}

// defineKroWeb creates the ResourceGraphDefinition and runs kro until the
// KroWeb CRD it generates is established.
func defineKroWeb(ctx context.Context, _ config, e *env, bin string) error {
	return defineKro(ctx, e, bin, kroRGD, "krowebs.kro.run", func() error { return probeKind(ctx, e.admin, webKind{gvk: kroGVK}) })
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// probeKind waits until the API server takes a resource of kind (a dry
// run): it serves a new CRD a moment after it is established.
func probeKind(ctx context.Context, c client.Client, kind webKind) error {
	var err error
	for range 100 {
		if err = c.Create(ctx, kind.objects(1, 1)[0], client.DryRunAll); err == nil {
			return nil
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("the API server does not take a %s: %w", kind.gvk.Kind, err)
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

// peersTable is the Markdown tables of every contender at every N: time
// and requests, then CPU and memory, then drift and restart. Ratios ("×")
// are to the typed hand-written operator's figure, then to the tutorial
// variant's (get, then create or update).
func peersTable(rows []peerRow) string {
	var b strings.Builder
	b.WriteString("| N | contender | converge | × hand-written: typed / get-update | requests (per resource) | at rest | CPU while converging | × hand-written | API server + etcd CPU | peak RSS (to the restart) | × hand-written |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, row := range rows {
		typed, tutorial := row.handwritten()
		for _, r := range row.Results {
			if r.Error != "" {
				fmt.Fprintf(&b, "| %d | %s | failed: %s | | | | | | | | |\n", row.N, r.Contender, strings.ReplaceAll(firstLine(r.Error), "|", "/"))
				continue
			}
			cpu := func(r *result) float64 { return r.ConvergeCPUSeconds + r.cpuIfExited() }
			fmt.Fprintf(&b, "| %d | %s | %s | %s | %d (%.2f) | %s | %.2f s | %s | %.2f s | %s | %s |\n", row.N, r.Contender, elapsed(r.Converge),
				ratios(r, typed, tutorial, func(r *result) float64 { return r.Converge.Seconds() }),
				r.Requests.total(), float64(r.Requests.total())/float64(row.N), atRest(r),
				cpu(r), ratios(r, typed, tutorial, cpu),
				r.ControlPlaneCPUSeconds, mib(r.PeakRSSKiB), ratios(r, typed, tutorial, func(r *result) float64 { return float64(r.PeakRSSKiB) }))
		}
	}
	b.WriteString("\n| N | contender | drift p50 / p99 | restart: change set back | restart: every resource checked | restart: requests |\n|---|---|---|---|---|---|\n")
	for _, row := range rows {
		for _, r := range row.Results[1:] {
			if r.Error != "" {
				continue
			}
			checked := elapsed(r.Restart.AllChecked)
			if r.Restart.NotAllChecked {
				checked = "not within " + restartWait.String()
			}
			fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %d |\n", row.N, r.Contender, driftCell(r.Drift), restartCell(r.Restart),
				checked, r.Restart.Requests.total())
		}
	}
	return b.String()
}

// handwritten are the hand-written operator's results: typed (server-side
// apply) and tutorial (get, then create or update); nil when missing.
func (row peerRow) handwritten() (typed, tutorial *result) {
	for _, r := range row.Results {
		if r.Error != "" {
			continue
		}
		switch r.Contender {
		case "hand-written (" + string(handwritten.VariantApply) + ")":
			typed = r
		case "hand-written (" + string(handwritten.VariantGetUpdate) + ")":
			tutorial = r
		}
	}
	return typed, tutorial
}

// ratios is r's figure over the typed and the tutorial hand-written
// operator's.
func ratios(r, typed, tutorial *result, figure func(*result) float64) string {
	ratio := func(base *result) string {
		if base == nil || figure(base) == 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f×", figure(r)/figure(base))
	}
	return ratio(typed) + " / " + ratio(tutorial)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// cpuIfExited is the CPU of a contender that exits once it has converged
// (the raw loop), whose ConvergeCPUSeconds is not set.
func (r *result) cpuIfExited() float64 {
	if r.ConvergeCPUSeconds == 0 {
		return r.CPUSeconds
	}
	return 0
}

func atRest(r *result) string {
	if r.QuietWindow == 0 {
		return "–"
	}
	return fmt.Sprintf("%d in %s", r.Quiet.total(), r.QuietWindow.Round(time.Second))
}

func driftCell(d driftFigures) string {
	switch {
	case d.Changes == 0:
		return "–"
	case d.Missed == d.Changes:
		return fmt.Sprintf("none of %d within %s", d.Changes, revertWait)
	case d.Missed > 0:
		return fmt.Sprintf("%s / %s (%d of %d not within %s)", ms(d.P50), ms(d.P99), d.Missed, d.Changes, revertWait)
	}
	return ms(d.P50) + " / " + ms(d.P99)
}

func restartCell(f restartFigures) string {
	if f.NotReverted {
		return "not within " + revertWait.String()
	}
	return fmt.Sprintf("%s after its start", elapsed(f.RevertedSinceStart))
}

func writePeers(dir string, rows []peerRow, table string) error {
	js, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return err
	}
	var md bytes.Buffer
	fmt.Fprintf(&md, "Measured %s with Go %s on %d CPUs (`make bench-peers`)%s, one run each, at %s.\n\n", time.Now().UTC().Format("2006-01-02 15:04"), runtime.Version(), runtime.NumCPU(), pinNote(), revision())
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

// replot draws converge.svg into out from the results.json of several peer
// runs (a run, then reruns of some contenders): for each N and contender,
// the first result that did not fail, so a rerun fills in what the run
// lacks and its floor does not replace the run's.
func replot(out string, dirs []string) error {
	var rows []peerRow
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, "results.json"))
		if err != nil {
			return err
		}
		var runRows []peerRow
		if err := json.Unmarshal(data, &runRows); err != nil {
			return fmt.Errorf("%s/results.json: %w", dir, err)
		}
		for _, rr := range runRows {
			i := slices.IndexFunc(rows, func(r peerRow) bool { return r.N == rr.N })
			if i < 0 {
				rows = append(rows, peerRow{N: rr.N})
				i = len(rows) - 1
			}
			for _, res := range rr.Results {
				if res.Error != "" {
					continue
				}
				if !slices.ContainsFunc(rows[i].Results, func(r *result) bool { return r.Contender == res.Contender }) {
					rows[i].Results = append(rows[i].Results, res)
				}
			}
		}
	}
	slices.SortFunc(rows, func(a, b peerRow) int { return a.N - b.N })
	svg, err := plotPeers(rows)
	if err != nil {
		return err
	}
	return writeFiles(out, map[string][]byte{"converge.svg": svg})
}

// revision names the code measured: the commit, and "with local changes"
// when the work tree differs from it.
func revision() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "an unknown commit"
	}
	rev := "commit " + strings.TrimSpace(string(out))
	if status, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(status)) > 0 {
		rev += " with local changes"
	}
	return rev
}
