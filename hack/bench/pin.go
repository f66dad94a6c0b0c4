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
	var set unix.CPUSet
	set.Set(0)
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("pinning thread %d to CPU 0: %w", tid, err)
		}
	}
	pinned = true
	return nil
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
		return ", pinned (`-pin`): the bench and the control plane on CPU 0, each contender on CPU 1"
	}
	return ""
}
