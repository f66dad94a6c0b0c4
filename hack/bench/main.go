// Command bench is what `make bench` runs. For each N it measures stencil
// against two floors, a raw server-side-apply loop (hack/bench/rawapply)
// and the same loop that also writes each resource's status once, on a
// fresh local control plane (etcd and kube-apiserver only) each:
//
//   - time to converge N MyWebs (a ConfigMap, a Deployment and a Service
//     each) in 10 namespaces,
//   - the API requests of each, by verb and resource, from the API server's
//     audit log (each contender connects as its own user),
//   - stencil's requests in a quiet minute, and its drift-correction latency
//     over 100 changes by another field manager,
//   - peak RSS and CPU seconds of each process, and the peak RSS of a bare
//     controller-runtime manager that watches the same MyWebs
//     (hack/bench/crbaseline), the memory any such operator starts from,
//
// then prints the figures, and writes them with a plot of converge time
// against N into -out (docs/benchmarks by default).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stencil-operator/stencil/internal/dev/localcluster"
)

// config is what the flags set.
type config struct {
	sizes             []int
	runs              int
	namespaces        int
	workers           int
	quiet             time.Duration
	driftChanges      int
	profileAt         int
	cpuProfileAt      int
	cpuProfileSeconds int
	out               string
	bin               string
	stencilArgs       []string
	keep              bool
	peers             bool
	graph             bool
	// only: with peers, the contenders to run, by name (empty: all).
	only         []string
	helmOperator string
}

func main() {
	var cfg config
	sizes := flag.String("n", "100,500,1000", "Numbers of MyWebs, comma-separated.")
	flag.IntVar(&cfg.runs, "runs", 3, "Runs of each contender per N; the figures are the median run's.")
	flag.IntVar(&cfg.namespaces, "namespaces", 10, "Namespaces the MyWebs are spread over.")
	flag.IntVar(&cfg.workers, "raw-workers", 8, "Workers of the raw server-side-apply loop.")
	flag.DurationVar(&cfg.quiet, "quiet", time.Minute, "Steady-state window in which stencil's requests are counted.")
	flag.IntVar(&cfg.driftChanges, "drift-changes", 100, "Changes by another field manager that stencil must revert.")
	flag.IntVar(&cfg.profileAt, "heap-profile-n", 1000, "N at which to take stencil's heap profile (0: none).")
	flag.IntVar(&cfg.cpuProfileAt, "cpu-profile-n", 0, "N at which to take a CPU profile of stencil (and of each contender that serves pprof) and of kube-apiserver from the contender's start (0: none).")
	flag.IntVar(&cfg.cpuProfileSeconds, "cpu-profile-seconds", 10, "How long the CPU profiles of -cpu-profile-n run.")
	flag.StringVar(&cfg.out, "out", "docs/benchmarks", "Folder for results.md, results.json, converge.svg and the heap profile.")
	flag.BoolVar(&cfg.peers, "peers", false, "Run the peers instead: the raw + status floor, stencil, the hand-written MyWeb operator (both variants), kro (built by `PEERS=1 hack/tools/install.sh`) and the Helm operator (-helm-operator), one run each per N.")
	flag.BoolVar(&cfg.graph, "graph", false, "Run the graph workload instead: stencil's AppStack (templates/appstack) and kro with the same graph (hack/bench/peers/kro-appstack.yaml), one run each per N, the bench playing the StatefulSet, Job and Deployment controllers.")
	only := flag.String("contenders", "", "With -peers: only these contenders (comma-separated names as the results print them, e.g. \"hand-written (get-update)\"); the raw + status floor always runs.")
	flag.StringVar(&cfg.helmOperator, "helm-operator", os.Getenv("STENCIL_BENCH_HELM_OPERATOR"), "With -peers: the operator-sdk Helm operator's binary (default $STENCIL_BENCH_HELM_OPERATOR, else bin/helm-operator if `PEERS=1 hack/tools/install.sh` built it; docs/benchmarks.md says how to build it). Without it the Helm operator is not measured.")
	flag.BoolVar(&cfg.keep, "keep", false, "Keep each run's folder (audit log, stencil's log) and print where it is.")
	pin := flag.Bool("pin", false, "Run the bench and the control plane on CPU 0 and each contender on CPU 1 (needs taskset), as when an operator does not share CPUs with kube-apiserver.")
	stencilArgs := flag.String("stencil-args", "", "Extra flags for stencil, space-separated (to try settings).")
	plotFrom := flag.String("plot-from", "", "Measure nothing: draw -out/converge.svg from these peer runs' folders (comma-separated, a run then its reruns; a rerun fills in the contenders and N the run lacks or failed).")
	flag.Parse()
	if *plotFrom != "" {
		if !flagGiven("out") {
			fail(errors.New("-plot-from needs -out, the folder whose converge.svg it draws (e.g. docs/benchmarks/peers)"))
		}
		if err := replot(cfg.out, strings.Split(*plotFrom, ",")); err != nil {
			fail(err)
		}
		return
	}
	if *only != "" {
		cfg.only = strings.Split(*only, ",")
	}
	cfg.stencilArgs = strings.Fields(*stencilArgs)
	var err error
	if cfg.sizes, err = parseSizes(*sizes); err != nil {
		fail(err)
	}
	if cfg.runs < 1 {
		fail(errors.New("-runs must be at least 1"))
	}
	if cfg.bin, err = localcluster.BinDir(); err != nil {
		fail(err)
	}
	if built := filepath.Join(cfg.bin, "helm-operator"); cfg.helmOperator == "" && fileExists(built) {
		cfg.helmOperator = built // PEERS=1 hack/tools/install.sh built it
	}
	if cfg.cpuProfileSeconds < 1 {
		fail(errors.New("-cpu-profile-seconds must be at least 1"))
	}
	if *pin {
		if err := pinControlPlane(); err != nil {
			fail(err)
		}
	}
	ctrllog.SetLogger(logr.Discard()) // the bench's watch needs no log
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fail(err)
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}

func parseSizes(s string) ([]int, error) {
	var sizes []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > maxMyWebs {
			return nil, fmt.Errorf("-n: %q is not a number from 1 to %d", f, maxMyWebs)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

// programs are the child programs the bench builds and runs (the peers
// build the hand-written operator too, into the bin folder).
type programs struct{ rawapply, crbaseline string }

func run(ctx context.Context, cfg config) error {
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return err
	}
	bins := programs{rawapply: filepath.Join(cfg.bin, "rawapply"), crbaseline: filepath.Join(cfg.bin, "crbaseline")}
	// onekind is built as `make build` builds bin/stencil.
	if err := errors.Join(goBuild(ctx, bins.rawapply, "./hack/bench/rawapply"), goBuild(ctx, bins.crbaseline, "./hack/bench/crbaseline"),
		goBuild(ctx, filepath.Join(cfg.bin, "onekind"), "./hack/bench/onekind", "-tags", "fieldsv1string")); err != nil {
		return err
	}
	if cfg.graph {
		return runGraph(ctx, cfg)
	}
	if cfg.peers {
		if err := errors.Join(goBuild(ctx, filepath.Join(cfg.bin, "myweb-operator"), "./hack/bench/handwritten/myweb-operator"),
			goBuild(ctx, filepath.Join(cfg.bin, "chartweb"), "./hack/bench/chartweb")); err != nil {
			return err
		}
		return runPeers(ctx, cfg, bins)
	}
	fmt.Printf("stencil bench: N = %v MyWebs in %d namespaces; a fresh etcd + kube-apiserver for each run%s.\n\n", cfg.sizes, cfg.namespaces, pinNote())
	var results []row
	for _, n := range cfg.sizes {
		r, err := measure(ctx, cfg, n, bins)
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	fmt.Print(summary(results))
	var notes strings.Builder
	for _, r := range results {
		if r.N == 1000 || len(results) == 1 {
			note, err := renderCost(r.N, cfg.namespaces, r.Stencil.ConvergeCPUSeconds)
			if err != nil {
				return fmt.Errorf("render cost: %w", err)
			}
			fmt.Print("\n" + note)
			notes.WriteString("\n" + note)
		}
	}
	return writeResults(cfg.out, results, notes.String())
}

// measure runs the three contenders cfg.runs times, in turn, each on a
// fresh control plane; only stencil's last run goes on to the quiet minute,
// the drift changes and the heap profile. Converge times are the median
// run's. Then, once, the controller-runtime floor for memory.
func measure(ctx context.Context, cfg config, n int, bins programs) (row, error) {
	var raws, rawStatuses, stencils []*result
	for i := range cfg.runs {
		for _, withStatus := range []bool{false, true} {
			raw, err := measureRaw(ctx, cfg, n, bins, withStatus)
			if err != nil {
				return row{}, fmt.Errorf("raw loop (status: %v), N=%d: %w", withStatus, n, err)
			}
			printRun(raw)
			if withStatus {
				rawStatuses = append(rawStatuses, raw)
			} else {
				raws = append(raws, raw)
			}
		}
		st, err := measureOperator(ctx, cfg, n, stencilContender(cfg), i == cfg.runs-1)
		if err != nil {
			return row{}, fmt.Errorf("stencil, N=%d: %w", n, err)
		}
		printRun(st)
		stencils = append(stencils, st)
	}
	floor, err := measureBaseline(ctx, cfg, n, bins)
	if err != nil {
		return row{}, fmt.Errorf("controller-runtime floor, N=%d: %w", n, err)
	}
	printRun(floor)
	return row{N: n, Raw: combine(raws), RawStatus: combine(rawStatuses), Stencil: combine(stencils), ControllerRuntime: floor}, nil
}

func goBuild(ctx context.Context, out, pkg string, flags ...string) error {
	cmd := command(ctx, "go", append(append([]string{"build"}, flags...), "-o", out, pkg)...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0") // as `make build` builds stencil
	return cmd.Run()
}

// elapsed is a duration printed in seconds with two decimals.
func elapsed(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + " s" }

// flagGiven reports whether the command line set the flag name.
func flagGiven(name string) bool {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}
