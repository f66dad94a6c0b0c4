package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"

	operatorv1 "github.com/stencil-operator/stencil/api/operator/v1"
)

// restartFigures are what a restart of stencil over N converged MyWebs
// costs: a new process (as after a crash, an upgrade or a leader failover)
// starts, a change by another manager is made as soon as it reconciles, and
// the bench waits until it has checked every MyWeb.
type restartFigures struct {
	// Requests are the new process's, from its start until every MyWeb
	// was checked.
	Requests requests `json:"requests"`
	// Reverted: the change was set back this long after it was made, and
	// RevertedSinceStart this long after the process started.
	Reverted           time.Duration `json:"revertedNanoseconds"`
	RevertedSinceStart time.Duration `json:"revertedSinceStartNanoseconds"`
	// AllChecked: every MyWeb was reconciled, and nothing was left in the
	// queue, this long after the process started.
	AllChecked time.Duration `json:"allCheckedNanoseconds"`
}

// measureRestart stops op, starts a new stencil, scales one MyWeb's
// Deployment (another manager's change) once the new process has
// reconciled anything, and waits for the change to be set back and for
// every MyWeb to be checked. It returns the figures with the new process,
// which the caller stops.
func measureRestart(ctx context.Context, cfg config, e *env, w *watcher, webs []*operatorv1.MyWeb, op *operator) (restarted, error) {
	if err := op.stop(); err != nil {
		return restarted{}, err
	}
	if err := w.watchDeployments(ctx); err != nil {
		return restarted{}, err
	}
	next, err := startStencil(ctx, cfg, e, "stencil-restarted.log")
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
func restartCost(ctx context.Context, e *env, w *watcher, webs []*operatorv1.MyWeb, next *operator) (restartFigures, error) {
	var f restartFigures
	err := next.waitMetric(ctx, func(reconciles, _ int) bool { return reconciles > 0 })
	if err != nil {
		return f, err
	}
	web := webs[len(webs)/2]
	if f.Reverted, err = revertTime(ctx, e.admin, w, types.NamespacedName{Namespace: web.Namespace, Name: web.Name}); err != nil {
		return f, fmt.Errorf("after the restart: %w", err)
	}
	f.RevertedSinceStart = time.Since(next.started)
	n := len(webs)
	if err := next.waitMetric(ctx, func(reconciles, depth int) bool { return reconciles >= n && depth == 0 }); err != nil {
		return f, err
	}
	checked := time.Now()
	f.AllChecked = checked.Sub(next.started)
	f.Requests, err = countRequests(e.auditLog, "stencil", next.started, checked)
	return f, err
}

// waitMetric polls stencil's MyWeb reconcile count and queue depth until
// done says so.
func (op *operator) waitMetric(ctx context.Context, done func(reconciles, depth int) bool) error {
	deadline := time.Now().Add(convergeTimeout)
	for time.Now().Before(deadline) {
		if err := op.failed(); err != nil {
			return err
		}
		reconciles, err1 := op.metricSum(ctx, "controller_runtime_reconcile_total", `controller="myweb"`)
		depth, err2 := op.metricSum(ctx, "workqueue_depth", `name="myweb"`)
		if err1 == nil && err2 == nil && done(reconciles, depth) {
			return nil
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("stencil did not get there within %s", convergeTimeout)
}
