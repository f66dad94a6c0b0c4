package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// With -pin the bench, and so the control plane it starts, run on CPU 0 and
// every contender on CPU 1, as on a cluster where the operator does not
// share CPUs with kube-apiserver and etcd. Unpinned, on a machine of two
// cores, each contender's own CPU slows the API server it waits for, and
// converge times measure the sum of both.
var pinned bool

// pinControlPlane binds every thread of this process to CPU 0. Threads and
// processes started later (the control plane) inherit that.
func pinControlPlane() error {
	if runtime.NumCPU() < 2 {
		return errors.New("-pin needs at least two CPUs")
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		return fmt.Errorf("-pin runs contenders with taskset (util-linux): %w", err)
	}
	// A thread that an unpinned one starts during a pass escapes it: pass
	// again until a pass finds every thread pinned already.
	for pass := 0; ; pass++ {
		changed, err := pinThreads(0)
		if err != nil {
			return err
		}
		if !changed {
			break
		}
		if pass == 10 {
			return errors.New("-pin: threads kept appearing unpinned")
		}
	}
	pinned = true
	return nil
}

// pinThreads binds every thread of this process to cpu, and reports
// whether any was not bound to it yet.
func pinThreads(cpu int) (bool, error) {
	var want unix.CPUSet
	want.Set(cpu)
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return false, err
	}
	changed := false
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		var have unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &have); err == nil && have == want {
			continue
		}
		changed = true
		if err := unix.SchedSetaffinity(tid, &want); err != nil && !errors.Is(err, unix.ESRCH) {
			return false, fmt.Errorf("pinning thread %d to CPU %d: %w", tid, cpu, err)
		}
	}
	return changed, nil
}

// contenderCommand runs a contender: on CPU 1 with -pin. taskset execs the
// program, so its PID (whose CPU and memory the bench reads) is the
// program's.
func contenderCommand(ctx context.Context, binary string, args ...string) *exec.Cmd {
	if pinned {
		return exec.CommandContext(ctx, "taskset", append([]string{"-c", "1", binary}, args...)...)
	}
	return exec.CommandContext(ctx, binary, args...)
}

// pinNote says, for results, where the contenders ran.
func pinNote() string {
	if pinned {
		return ", pinned (`-pin`): the bench (with its watch that times convergence) and the control plane on CPU 0, each contender on CPU 1 (so every Go process runs with GOMAXPROCS=1)"
	}
	return ""
}

// checkPinned fails unless each of pids may run on CPU 0 only.
func checkPinned(pids map[string]int) error {
	if !pinned {
		return nil
	}
	var want unix.CPUSet
	want.Set(0)
	for name, pid := range pids {
		var have unix.CPUSet
		if err := unix.SchedGetaffinity(pid, &have); err != nil {
			return fmt.Errorf("-pin: reading the CPUs of %s: %w", name, err)
		}
		if have != want {
			return fmt.Errorf("-pin: %s (pid %d) is not pinned to CPU 0", name, pid)
		}
	}
	return nil
}
