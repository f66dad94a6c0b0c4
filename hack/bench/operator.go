package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// settle is the pause between convergence and the quiet window: the event
// recorder sends events asynchronously, and those still count, as settle
// requests.
const settle = 5 * time.Second

// measureOperator: the custom resources exist before the contender
// starts; the clock runs from starting the process until every one is
// converged (MyWeb: Ready for its generation). A full run goes on to the
// quiet window, the drift changes, the health of the Deployments (the
// contenders that report it), stencil's profiles and upgrade preview, and
// a restart.
func measureOperator(ctx context.Context, cfg config, n int, c *contender, full bool) (_ *result, err error) {
	e, err := startEnv(ctx, cfg, c.user)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, e.stop()) }()
	if c.web.prepare != nil {
		if err := c.web.prepare(ctx, e); err != nil {
			return nil, err
		}
		if err := probeKind(ctx, e.admin, c.web); err != nil {
			return nil, err
		}
	}
	webs := c.web.objects(n, cfg.namespaces)
	if err := createAll(ctx, e.admin, webs); err != nil {
		return nil, fmt.Errorf("creating the %ss: %w", c.web.gvk.Kind, err)
	}
	w, err := startWatcher(ctx, e, n, c.web)
	if err != nil {
		return nil, err
	}
	defer w.stop()
	controlPlane, steal := e.controlPlaneCPU(), stealSeconds()
	op, err := startContender(ctx, e, c, c.user+".log")
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, op.stop()) }()
	var profiled chan error
	if full && c.pprof && n == cfg.cpuProfileAt {
		profiled = make(chan error, 2)
		go func() { profiled <- op.cpuProfile(ctx, cfg.out, n, cfg.cpuProfileSeconds) }()
		go func() {
			profiled <- e.profileAPIServer(ctx, cfg.out, fmt.Sprintf("apiserver-%s-%d", c.user, n), cfg.cpuProfileSeconds)
		}()
	}
	r, converged, err := observeConvergence(ctx, e, w, op, n, controlPlane)
	if err == nil {
		r.StealSeconds = stealSeconds() - steal
	}
	if err != nil || !full {
		return r, err
	}
	if err := observeRest(ctx, cfg, e, op, r, converged); err != nil {
		return nil, err
	}
	if profiled != nil {
		if err := errors.Join(<-profiled, <-profiled); err != nil {
			return nil, err
		}
	}
	return measureFullRun(ctx, cfg, n, c, e, w, op, webs, r)
}

// measureFullRun takes into r the figures of a full run after its quiet
// window and CPU profiles: stencil's heap profile, the drift changes, the
// health of the Deployments (the contenders that report it), stencil's
// upgrade preview, the process's memory and CPU, and a restart.
func measureFullRun(ctx context.Context, cfg config, n int, c *contender, e *env, w *watcher, op *operator, webs []client.Object, r *result) (_ *result, err error) {
	if c.pprof && n == cfg.profileAt {
		if r.HeapTop, err = op.heapProfile(ctx, cfg.out, n); err != nil {
			return nil, err
		}
	}
	if r.Drift, err = measureDrift(ctx, e.admin, w, webs, cfg.driftChanges); err != nil {
		return nil, err
	}
	if c.web.health {
		if r.Health, err = measureHealth(ctx, e, w, n); err != nil {
			return nil, err
		}
	}
	if c.stencil {
		if r.Preview, err = measurePreview(ctx, cfg, e); err != nil {
			return nil, err
		}
	}
	if r.PeakRSSKiB, r.FileRSSKiB, err = op.memory(); err != nil {
		return nil, err
	}
	if r.CPUSeconds, err = op.cpuSeconds(); err != nil {
		return nil, err
	}
	restarted, err := measureRestart(ctx, e, w, webs, op)
	if restarted.op != nil {
		err = errors.Join(err, restarted.op.stop())
	}
	r.Restart = restarted.restartFigures
	if err == nil && c.stencil {
		err = stencilMissed(r)
	}
	return r, err
}

// stencilMissed fails a run of stencil's that let a change stand: the
// bench holds stencil to correcting drift and checking every resource after
// a restart, which it records of the peers.
func stencilMissed(r *result) error {
	switch {
	case r.Drift.Missed > 0:
		return fmt.Errorf("stencil did not revert %d of %d changes within %s", r.Drift.Missed, r.Drift.Changes, revertWait)
	case r.Restart.NotReverted:
		return fmt.Errorf("after a restart, stencil did not revert a change within %s", revertWait)
	case r.Restart.NotAllChecked:
		return fmt.Errorf("after a restart, stencil did not check every MyWeb within %s", restartWait)
	}
	return nil
}

// observeConvergence waits until every resource has converged and takes
// the figures of convergence: time, requests, reconciles, CPU and memory so
// far.
func observeConvergence(ctx context.Context, e *env, w *watcher, op *operator, n int, controlPlane float64) (*result, time.Time, error) {
	converged, err := w.waitAllConverged(ctx, op)
	if err != nil {
		return nil, converged, err
	}
	r := &result{Contender: op.contender.name, N: n, Converge: converged.Sub(op.started)}
	r.ControlPlaneCPUSeconds = e.controlPlaneCPU() - controlPlane
	r.ConvergeCPUSeconds, _ = op.cpuSeconds()
	r.CPUSeconds = r.ConvergeCPUSeconds
	if r.Requests, err = countRequests(e.auditLog, e.user, op.started, converged); err != nil {
		return nil, converged, err
	}
	// The contender's own count of its requests, to check the audit log's
	// (client-go's metric, which not every contender serves).
	r.ClientRequests, _ = op.metricSum(ctx, metric{name: "rest_client_requests_total"})
	if r.Reconciles, err = op.metricSum(ctx, op.contender.reconciles); err != nil {
		return nil, converged, err
	}
	if err := countRendered(ctx, e.admin, n); err != nil {
		return nil, converged, err
	}
	r.PeakRSSKiB, r.FileRSSKiB, err = op.memory()
	return r, converged, err
}

// observeRest counts the contender's requests while it settles and then in
// the quiet window.
func observeRest(ctx context.Context, cfg config, e *env, op *operator, r *result, converged time.Time) error {
	if err := sleep(ctx, settle); err != nil {
		return err
	}
	quietFrom := time.Now()
	if err := sleep(ctx, cfg.quiet); err != nil {
		return err
	}
	quietTo := time.Now()
	var err error
	if r.Settle, err = countRequests(e.auditLog, e.user, converged, quietFrom); err != nil {
		return err
	}
	if r.Quiet, err = countRequests(e.auditLog, e.user, quietFrom, quietTo); err != nil {
		return err
	}
	r.QuietWindow = quietTo.Sub(quietFrom)
	return op.failed()
}

// operator is a running contender.
type operator struct {
	contender *contender
	cmd       *exec.Cmd
	started   time.Time
	exited    chan struct{} // closed when the process has exited
	exitErr   error
	metrics   string
	pprof     string
	binary    string
	logPath   string
	logFile   *os.File
	stopped   bool
}

// startContender starts c's process with its metrics (and pprof) on free
// ports.
func startContender(ctx context.Context, e *env, c *contender, logName string) (*operator, error) {
	metricsPort, err := freePort()
	if err != nil {
		return nil, err
	}
	pprofPort, err := freePort()
	if err != nil {
		return nil, err
	}
	op, err := startProgram(ctx, e, c.binary, c.args("127.0.0.1:"+metricsPort, "127.0.0.1:"+pprofPort), logName)
	if err != nil {
		return nil, err
	}
	op.contender = c
	op.metrics, op.pprof = "http://127.0.0.1:"+metricsPort, "http://127.0.0.1:"+pprofPort
	return op, nil
}

// startProgram starts binary with args as e's contender (its kubeconfig),
// its output in logName in e's folder.
func startProgram(ctx context.Context, e *env, binary string, args []string, logName string) (*operator, error) {
	op := &operator{binary: binary, logPath: filepath.Join(e.dir, logName), exited: make(chan struct{})}
	var err error
	if op.logFile, err = os.Create(op.logPath); err != nil {
		return nil, err
	}
	op.cmd = contenderCommand(ctx, binary, args...)
	op.cmd.Env = append(os.Environ(), "KUBECONFIG="+e.kubeconfig)
	op.cmd.Stdout, op.cmd.Stderr = op.logFile, op.logFile
	op.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	op.started = time.Now()
	if err := op.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", filepath.Base(binary), err)
	}
	go func() {
		op.exitErr = op.cmd.Wait()
		close(op.exited)
	}()
	return op, nil
}

// stop ends the process; a second call does nothing.
func (op *operator) stop() error {
	if op.stopped {
		return nil
	}
	op.stopped = true
	_ = op.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-op.exited:
	case <-time.After(30 * time.Second):
		_ = op.cmd.Process.Kill()
		<-op.exited
	}
	return op.logFile.Close()
}

// failed says why stencil is no longer running, with its last log lines.
func (op *operator) failed() error {
	select {
	case <-op.exited:
		return fmt.Errorf("%s exited (%w); log %s:\n%s", filepath.Base(op.binary), op.exitErr, op.logPath, tail(op.logPath, 20))
	default:
		return nil
	}
}

// memory reads stencil's peak RSS and its file-backed RSS now (the mapped
// binary), in KiB.
func (op *operator) memory() (peak, file int64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", op.cmd.Process.Pid))
	if err != nil {
		return 0, 0, err
	}
	return parseMemory(string(data))
}

// parseMemory reads the peak RSS (VmHWM) and the file-backed RSS (RssFile),
// in KiB, from the text of /proc/<pid>/status. (The rusage of a child is no
// use: its ru_maxrss counts the parent's memory at fork.)
func parseMemory(status string) (peak, file int64, err error) {
	var found int
	for line := range strings.Lines(status) {
		key, value, ok := strings.Cut(line, ":")
		if !ok || (key != "VmHWM" && key != "RssFile") {
			continue
		}
		kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", key, err)
		}
		if key == "VmHWM" {
			peak = kib
		} else {
			file = kib
		}
		found++
	}
	if found != 2 {
		return 0, 0, errors.New("no VmHWM or RssFile line")
	}
	return peak, file, nil
}

// cpuSeconds is stencil's user plus system CPU time so far.
func (op *operator) cpuSeconds() (float64, error) { return cpuSeconds(op.cmd.Process.Pid) }

// cpuSeconds is a process's user plus system CPU time so far, from
// /proc/<pid>/stat.
func cpuSeconds(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// utime and stime are fields 14 and 15 of the line; count from after
	// the command name, which is in parentheses.
	_, rest, _ := strings.Cut(string(data), ") ")
	fields := strings.Fields(rest)
	if len(fields) < 13 {
		return 0, errors.New("short /proc stat")
	}
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / userHZ, errors.Join(err1, err2)
}

// userHZ is the unit of /proc's CPU times on Linux.
const userHZ = 100

// stealSeconds is the CPU time the hypervisor has taken from this machine
// so far, summed over its CPUs (0 when it cannot be read): a run that lost
// much of it is slower for reasons of the machine, not of the contender.
func stealSeconds() float64 {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	s, _ := parseSteal(string(data))
	return s
}

// parseSteal reads the steal column, the eighth number of /proc/stat's
// "cpu" line.
func parseSteal(stat string) (float64, error) {
	for line := range strings.Lines(stat) {
		fields := strings.Fields(line)
		if len(fields) > 8 && fields[0] == "cpu" {
			steal, err := strconv.ParseFloat(fields[8], 64)
			return steal / userHZ, err
		}
	}
	return 0, errors.New("no cpu line in /proc/stat")
}

// metricSum sums the samples of one metric in the contender's /metrics
// whose labels contain every one of m's label pairs.
func (op *operator) metricSum(ctx context.Context, m metric) (int, error) {
	name, labels := m.name, m.labels
	body, err := get(ctx, op.metrics+"/metrics")
	if err != nil {
		return 0, err
	}
	defer func() { _ = body.Close() }()
	total := 0.0
	scanner := bufio.NewScanner(body)
	for scanner.Scan() {
		line := scanner.Text()
		if (!strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ")) || !containsAll(line, labels) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("metrics line %q: %w", line, err)
		}
		total += v
	}
	return int(total), scanner.Err()
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// heapProfile saves the contender's heap profile and returns the top of it by
// in-use bytes.
func (op *operator) heapProfile(ctx context.Context, out string, n int) (string, error) {
	body, err := get(ctx, op.pprof+"/debug/pprof/heap?gc=1")
	if err != nil {
		return "", err
	}
	defer func() { _ = body.Close() }()
	path := filepath.Join(out, fmt.Sprintf("heap-%d.pb.gz", n))
	if !op.contender.stencil {
		path = filepath.Join(out, fmt.Sprintf("heap-%s-%d.pb.gz", op.contender.user, n))
	}
	if err := saveTo(path, body); err != nil {
		return "", err
	}
	top, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=15", "-sample_index=inuse_space", op.binary, path).Output()
	if err != nil {
		return "", fmt.Errorf("go tool pprof: %w", err)
	}
	return string(top), nil
}

// cpuProfile saves a profile of stencil's first seconds, while it converges.
func (op *operator) cpuProfile(ctx context.Context, out string, n, seconds int) error {
	var body io.ReadCloser
	err := errors.New("no answer")
	for deadline := time.Now().Add(5 * time.Second); err != nil && time.Now().Before(deadline); {
		if body, err = get(ctx, op.pprof+"/debug/pprof/profile?seconds="+strconv.Itoa(seconds)); err != nil {
			time.Sleep(10 * time.Millisecond) // the endpoint is not up yet
		}
	}
	if err != nil {
		return fmt.Errorf("CPU profile: %w", err)
	}
	defer func() { _ = body.Close() }()
	path := filepath.Join(out, fmt.Sprintf("cpu-%d.pb.gz", n))
	if !op.contender.stencil {
		path = filepath.Join(out, fmt.Sprintf("cpu-%s-%d.pb.gz", op.contender.user, n))
	}
	return saveTo(path, body)
}

func saveTo(path string, r io.Reader) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		return errors.Join(err, f.Close())
	}
	return f.Close()
}

func get(ctx context.Context, url string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return resp.Body, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func tail(path string, n int) string {
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
