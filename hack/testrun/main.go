// Command testrun runs every test of the module (`make test`): it builds
// each package's test binary once, with the e2e build tag, then runs them
// side by side, the slowest first, splitting the packages whose tests take
// minutes into shards that run as processes of their own. Each process
// starts its own local control plane (as `go test` runs each package), so
// shards share nothing; the tests of a shard run in order, as in one
// package.
//
// Most of a test's time is waiting (for a Lease to expire, a backoff, a
// quiet minute), not CPU, so two cores run several test processes at once
// at little cost to each. Go's own test runner runs one package per core.
//
// Usage:
//
//	go run ./hack/testrun [-j N] [-v] [-run REGEXP] [-short] [packages]
//
// The output is go test's: "ok" or "FAIL", the package (and shard), and
// the time, then the process's CPU time (its control plane's included);
// a failing process's output in full; at the end, all processes' CPU time.
// Two cores give 120 s of CPU a minute: past that, processes wait on each
// other, and cutting CPU, not reordering, shortens the run.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// shard is a part of a package's tests that runs in a process of its own.
type shard struct {
	name  string
	tests []string // top-level test names; nil: every test no other shard names
}

// shards splits the packages whose tests take longest (each shard about
// 100 s on two cores, measured in issue 30). A test not named here
// runs in the package's last shard, the one without names.
var shards = map[string][]shard{
	"github.com/stencil-operator/stencil/reconciler": {
		{"steady", []string{"TestSteadyStateSendsNoRequests"}},
		{"fights", []string{"TestFightIsPaced", "TestObjectDeletedUnseenIsRecreated", "TestFencedWriteIsNoFailure"}},
		{"ownership", []string{"TestNamespaceDeletionIsQuiet", "TestHandedOverFieldIsLeftToItsNewManager", "TestCommonLabelDoesNotFillTheCache", "TestImmutableFieldChangeDecidesDataOnTheLiveObject", "TestSpecFixDuringStatusWriteIsApplied"}},
		{"rest", nil},
	},
	"github.com/stencil-operator/stencil/internal/dev/scaffold": {
		{"init", []string{"TestInitProjectRunsAndPasses"}},
		{"rest", nil},
	},
	"github.com/stencil-operator/stencil/e2e": {
		{"shards", []string{"TestThreeShards", "TestGeneratedValuesSurvive", "TestChartUpgradeByReimport"}},
		{"paused", []string{"TestPausedLeaderWritesNothing", "TestNewVersionOverTheRelease"}},
		{"faults", []string{"TestWatchExpiry", "TestThrottled", "TestAPIServerRestart", "TestEtcdRestart"}},
		{"failover", []string{"TestLeaderFailover", "TestKilledWhileConvergingRecovers", "TestUpgradePreviewAndPacedRollout", "TestTenantServiceAccountBoundsWhatIsMade"}},
		{"rest", nil},
	},
}

// longShards are the shards that take longest on two cores with the rest
// beside them (measured in issue 56: about 250, 225 and 220 s): they
// start first, before the other shards (100).
var longShards = map[string]int{
	"github.com/stencil-operator/stencil/internal/dev/scaffold [init]": 250,
	"github.com/stencil-operator/stencil/reconciler [rest]":            225,
	"github.com/stencil-operator/stencil/e2e [rest]":                   220,
}

// shardWeight orders a shard among the jobs.
func shardWeight(pkg, shard string) int {
	if w, ok := longShards[pkg+" ["+shard+"]"]; ok {
		return w
	}
	return 100
}

// seconds are how long the slowest packages' tests take on two cores
// (measured): they start first, so that none of them is left to run alone
// at the end. Shards count as long.
var seconds = map[string]int{
	"github.com/stencil-operator/stencil/internal/dev/scaffold":        85,
	"github.com/stencil-operator/stencil/internal/testing/processtest": 65,
	"github.com/stencil-operator/stencil/hack/run":                     65,
	"github.com/stencil-operator/stencil/internal/operator/kinds":      55,
	"github.com/stencil-operator/stencil/internal/dev/localcluster":    50,
	"github.com/stencil-operator/stencil/reconciler/decorator":         20,
	"github.com/stencil-operator/stencil/hack/bench/handwritten":       20,
	"github.com/stencil-operator/stencil/docs":                         15,
}

type pkg struct {
	ImportPath   string
	Dir          string
	TestGoFiles  []string
	XTestGoFiles []string
}

type job struct {
	pkg   pkg
	shard string
	args  []string
	// weight orders the jobs, longest first.
	weight int
}

func (j job) String() string {
	if j.shard == "" {
		return j.pkg.ImportPath
	}
	return j.pkg.ImportPath + " [" + j.shard + "]"
}

func main() {
	parallel := flag.Int("j", 6, "Test processes at once.")
	verbose := flag.Bool("v", false, "Print every test's output, as go test -v.")
	run := flag.String("run", "", "Run only the tests that match (go test -run).")
	short := flag.Bool("short", false, "Tell long tests to shorten (go test -short).")
	timeout := flag.Duration("timeout", 30*time.Minute, "Fail a test process that runs longer (go test -timeout).")
	tags := flag.String("tags", "e2e", "Build tags (go test -tags).")
	flag.Parse()
	patterns := flag.Args()
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	start := time.Now()
	if err := runAll(patterns, *tags, *parallel, options{verbose: *verbose, run: *run, short: *short, timeout: *timeout}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		fmt.Printf("FAIL (%.0fs)\n", time.Since(start).Seconds())
		os.Exit(1)
	}
	fmt.Printf("ok (%.0fs)\n", time.Since(start).Seconds())
}

type options struct {
	verbose, short bool
	run            string
	timeout        time.Duration
}

func runAll(patterns []string, tags string, parallel int, o options) error {
	pkgs, err := testPackages(patterns, tags)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "stencil-testrun-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	built := time.Now()
	if err := build(pkgs, tags, dir); err != nil {
		return err
	}
	fmt.Printf("built %d test binaries in %.0fs\n", len(pkgs), time.Since(built).Seconds())
	jobs, err := plan(pkgs, o)
	if err != nil {
		return err
	}
	return runJobs(jobs, dir, parallel, o)
}

// testPackages lists the packages that have tests.
func testPackages(patterns []string, tags string) ([]pkg, error) {
	out, err := exec.Command("go", append([]string{"list", "-tags", tags, "-json=ImportPath,Dir,TestGoFiles,XTestGoFiles"}, patterns...)...).Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w%s", err, stderrOf(err))
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			return nil, err
		}
		if len(p.TestGoFiles)+len(p.XTestGoFiles) > 0 {
			pkgs = append(pkgs, p)
		}
	}
	return pkgs, nil
}

// build writes each test package's binary into dir (see binary). go test
// -c vets them as go test does. The binaries carry no DWARF nor symbol
// table (-s -w; stack traces come from the pclntab, which stays): linking
// 25 binaries took 91 s on 2 cores with them, 50 s without.
func build(pkgs []pkg, tags, dir string) error {
	args := []string{"test", "-tags", tags, "-ldflags=-s -w", "-c", "-o", dir + string(filepath.Separator)}
	for _, p := range pkgs {
		args = append(args, p.ImportPath)
	}
	cmd := exec.Command("go", args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building the tests: %w", err)
	}
	return nil
}

// plan makes one job per package, or per shard of a sharded package.
func plan(pkgs []pkg, o options) ([]job, error) {
	var jobs []job
	for _, p := range pkgs {
		base := []string{"-test.paniconexit0", "-test.count=1", "-test.timeout=" + o.timeout.String()}
		if o.verbose {
			base = append(base, "-test.v")
		}
		if o.short {
			base = append(base, "-test.short")
		}
		if o.run != "" {
			base = append(base, "-test.run="+o.run)
		}
		split, ok := shards[p.ImportPath]
		if !ok || o.run != "" { // -run picks tests itself: one process
			jobs = append(jobs, job{pkg: p, args: base, weight: seconds[p.ImportPath]})
			continue
		}
		named, err := checkShards(p, split)
		if err != nil {
			return nil, err
		}
		for _, s := range split {
			args := slices.Clone(base)
			if s.tests != nil {
				args = append(args, "-test.run=^("+strings.Join(s.tests, "|")+")$")
			} else {
				args = append(args, "-test.skip=^("+strings.Join(named, "|")+")$")
			}
			jobs = append(jobs, job{pkg: p, shard: s.name, args: args, weight: shardWeight(p.ImportPath, s.name)})
		}
	}
	slices.SortStableFunc(jobs, func(a, b job) int { return b.weight - a.weight })
	return jobs, nil
}

// checkShards returns the tests split names, and refuses a name that is
// not one of p's tests or that two shards name, and a split without
// exactly one shard for the tests no shard names.
func checkShards(p pkg, split []shard) ([]string, error) {
	tests, err := testNames(p)
	if err != nil {
		return nil, err
	}
	var named []string
	rest := 0
	for _, s := range split {
		if s.tests == nil {
			rest++
		}
		for _, name := range s.tests {
			if !slices.Contains(tests, name) {
				return nil, fmt.Errorf("shard %s of %s names %s, which is not one of its tests", s.name, p.ImportPath, name)
			}
			if slices.Contains(named, name) {
				return nil, fmt.Errorf("shard %s of %s names %s, which another shard names too", s.name, p.ImportPath, name)
			}
			named = append(named, name)
		}
	}
	if rest != 1 {
		return nil, fmt.Errorf("%s has %d shards without names; it needs exactly one, for the tests no shard names", p.ImportPath, rest)
	}
	return named, nil
}

var testFunc = regexp.MustCompile(`(?m)^func (Test\w+)\(`)

// testNames are the top-level tests of p, from its test files.
func testNames(p pkg) ([]string, error) {
	var names []string
	for _, f := range append(slices.Clone(p.TestGoFiles), p.XTestGoFiles...) {
		src, err := os.ReadFile(filepath.Join(p.Dir, f))
		if err != nil {
			return nil, err
		}
		for _, m := range testFunc.FindAllSubmatch(src, -1) {
			names = append(names, string(m[1]))
		}
	}
	return names, nil
}

// runJobs runs the jobs, parallel at once, and prints each one's result as
// it ends; it fails when any failed.
func runJobs(jobs []job, dir string, parallel int, o options) error {
	sem := make(chan struct{}, max(parallel, 1))
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed []string
		total  time.Duration // the processes' CPU, their control planes' included
	)
	for _, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			var live io.Writer // with -v, lines as they come, each with its job
			if o.verbose {
				live = &prefixed{prefix: "[" + strings.TrimPrefix(j.String(), "github.com/stencil-operator/stencil/") + "] ", mu: &mu, w: os.Stdout}
			}
			out, took, cpu, err := runJob(j, dir, o, live)
			mu.Lock()
			defer mu.Unlock()
			total += cpu
			if err != nil && !o.verbose {
				_, _ = os.Stdout.Write(out)
			}
			if err != nil {
				failed = append(failed, j.String())
				fmt.Printf("FAIL\t%s\t%.3fs\tcpu %.0fs\n", j, took.Seconds(), cpu.Seconds())
				return
			}
			fmt.Printf("ok  \t%s\t%.3fs\tcpu %.0fs\n", j, took.Seconds(), cpu.Seconds())
		}()
	}
	wg.Wait()
	fmt.Printf("test processes' cpu: %.0fs\n", total.Seconds())
	if len(failed) > 0 {
		return fmt.Errorf("failed: %s", strings.Join(failed, ", "))
	}
	return nil
}

// runJob runs one test process in its package's folder, as go test does,
// and returns its output (live, when set, gets it as it comes too), its
// wall time and its CPU time: user and system, with that of the children it
// waited for (its control plane's processes, the commands it ran). A
// process killed at its timeout waited for none: its own time only.
func runJob(j job, dir string, o options, live io.Writer) ([]byte, time.Duration, time.Duration, error) {
	bin := filepath.Join(dir, binary(j.pkg.ImportPath))
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, j.args...)
	cmd.Dir = j.pkg.Dir
	var out bytes.Buffer
	var w io.Writer = &out
	if live != nil {
		w = io.MultiWriter(&out, live)
	}
	cmd.Stdout, cmd.Stderr = w, w
	start := time.Now()
	err := cmd.Run()
	if p, ok := live.(*prefixed); ok {
		p.flush()
	}
	var cpu time.Duration
	if s := cmd.ProcessState; s != nil {
		cpu = s.UserTime() + s.SystemTime()
	}
	return out.Bytes(), time.Since(start), cpu, err
}

// prefixed writes whole lines to w, each after prefix, under mu (shared by
// the jobs, so that their lines do not mix).
type prefixed struct {
	prefix  string
	mu      *sync.Mutex
	w       io.Writer
	partial []byte
}

func (p *prefixed) Write(b []byte) (int, error) {
	p.partial = append(p.partial, b...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			return len(b), nil
		}
		p.line(p.partial[:i+1])
		p.partial = p.partial[i+1:]
	}
}

// flush writes what is left of a last line without its newline.
func (p *prefixed) flush() {
	if len(p.partial) > 0 {
		p.line(append(p.partial, '\n'))
		p.partial = nil
	}
}

func (p *prefixed) line(l []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = fmt.Fprintf(p.w, "%s%s", p.prefix, l)
}

var majorVersion = regexp.MustCompile(`^v([2-9]|[1-9][0-9]+)$`)

// binary is the name go test -c -o dir/ gives the test binary of the
// package importPath: its last element (the one before, for a major
// version suffix such as /v2), and ".test".
func binary(importPath string) string {
	base := path.Base(importPath)
	if majorVersion.MatchString(base) {
		base = path.Base(path.Dir(importPath))
	}
	return base + ".test"
}

func stderrOf(err error) string {
	if exit, ok := errors.AsType[*exec.ExitError](err); ok && len(exit.Stderr) > 0 {
		return ": " + string(exit.Stderr)
	}
	return ""
}
