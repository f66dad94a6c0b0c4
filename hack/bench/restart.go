package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// restartFigures are what a restart of a contender over N converged
// resources costs: a new process (as after a crash, an upgrade or a leader
// failover) starts, a change by another manager is made as soon as it
// reconciles, and the bench waits until it has checked every resource.
type restartFigures struct {
	// Requests are the new process's, from its start until every resource
	// was checked.
	Requests requests `json:"requests"`
	// Reverted: the change was set back this long after it was made, and
	// RevertedSinceStart this long after the process started; NotReverted:
	// not within revertWait.
	Reverted           time.Duration `json:"revertedNanoseconds"`
	RevertedSinceStart time.Duration `json:"revertedSinceStartNanoseconds"`
	NotReverted        bool          `json:"notReverted,omitempty"`
	// AllChecked: every resource was reconciled, and nothing was left in
	// the queue, this long after the process started; NotAllChecked: not
	// within restartWait (a contender whose queue never empties).
	AllChecked    time.Duration `json:"allCheckedNanoseconds"`
	NotAllChecked bool          `json:"notAllChecked,omitempty"`
}

// restartWait bounds the wait for a restarted contender to check every
// resource.
const restartWait = 5 * time.Minute

// measureRestart stops op, starts the contender again, scales one
// resource's Deployment (another manager's change) once the new process has
// reconciled anything, and waits for the change to be set back and for
// every resource to be checked. It returns the figures with the new
// process, which the caller stops.
func measureRestart(ctx context.Context, e *env, w *watcher, webs []client.Object, op *operator) (restarted, error) {
	if err := op.stop(); err != nil {
		return restarted{}, err
	}
	if err := w.watchDeployments(ctx); err != nil {
		return restarted{}, err
	}
	next, err := startContender(ctx, e, op.contender, op.contender.user+"-restarted.log")
	if err != nil {
		return restarted{}, err
	}
	f, err := restartCost(ctx, e, w, webs, next)
	return restarted{f, next}, err
}

// restarted is a restart's figures and the new process.
type restarted struct {
	restartFigures
	op *operator
}

// restartCost takes the figures of the process next, just started.
func restartCost(ctx context.Context, e *env, w *watcher, webs []client.Object, next *operator) (restartFigures, error) {
	var f restartFigures
	err := next.waitMetric(ctx, convergeTimeout(len(webs)), func(reconciles, _ int) bool { return reconciles > 0 })
	if err != nil {
		return f, err
	}
	f.Reverted, err = revertTime(ctx, e.admin, w, client.ObjectKeyFromObject(webs[len(webs)/2]))
	switch {
	case errors.Is(err, errNotReverted):
		f.NotReverted = true
	case err != nil:
		return f, fmt.Errorf("after the restart: %w", err)
	default:
		f.RevertedSinceStart = time.Since(next.started)
	}
	n := len(webs)
	err = next.waitMetric(ctx, restartWait, func(reconciles, depth int) bool { return reconciles >= n && depth == 0 })
	if errors.Is(err, errNotThere) {
		f.NotAllChecked = true
	} else if err != nil {
		return f, err
	}
	checked := time.Now()
	f.AllChecked = checked.Sub(next.started)
	f.Requests, err = countRequests(e.auditLog, e.user, next.started, checked)
	return f, err
}

// errNotThere: waitMetric's condition did not hold in time.
var errNotThere = errors.New("not there in time")

// waitMetric polls the contender's reconcile count and queue depth until
// done says so, for at most timeout.
func (op *operator) waitMetric(ctx context.Context, timeout time.Duration, done func(reconciles, depth int) bool) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if err := op.failed(); err != nil {
			return err
		}
		reconciles, err1 := op.metricSum(ctx, op.contender.reconciles)
		depth, err2 := op.metricSum(ctx, op.contender.depth)
		if err1 == nil && err2 == nil && done(reconciles, depth) {
			return nil
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("%s: %w (%s)", op.contender.name, errNotThere, timeout)
}
