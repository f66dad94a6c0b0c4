package main

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1 "github.com/stencil-operator/stencil/api/operator/v1"
)

// healthFigures: what it costs a contender to see its objects become
// healthy.
type healthFigures struct {
	// Marked is how long the bench took to write every Deployment's status,
	// both steps.
	Marked time.Duration `json:"markedNanoseconds"`
	// Ready is from the first mark until every MyWeb was Ready.
	Ready time.Duration `json:"readyNanoseconds"`
	// Requests are the contender's meanwhile.
	Requests requests `json:"requests"`
}

// measureHealth stands in for the Deployment controller that the bench's
// control plane does not run: it writes every MyWeb's Deployment status in
// two steps as that controller does (its pod created but not available,
// then available) and times until every MyWeb is Ready, counting the
// contender's requests meanwhile. Health costs stencil no polling: each
// Deployment's status event brings its MyWeb back, and its status changes
// with each step (Progressing with the new counts, then Ready), at most
// once a second.
func measureHealth(ctx context.Context, e *env, w *watcher, n int) (healthFigures, error) {
	list := &appsv1.DeploymentList{}
	if err := e.admin.List(ctx, list, webLabels); err != nil {
		return healthFigures{}, err
	}
	if len(list.Items) != n {
		return healthFigures{}, fmt.Errorf("%d Deployments, want %d", len(list.Items), n)
	}
	began := time.Now()
	for _, available := range []bool{false, true} {
		err := inParallel(list.Items, func(d appsv1.Deployment) error {
			markRollout(&d, available)
			return e.admin.Status().Update(ctx, &d, client.FieldOwner("bench-deployment-controller"))
		})
		if err != nil {
			return healthFigures{}, fmt.Errorf("writing the Deployments' status: %w", err)
		}
		if err := e.admin.List(ctx, list, webLabels); err != nil {
			return healthFigures{}, err
		}
	}
	f := healthFigures{Marked: time.Since(began)}
	ready, err := w.waitHealthy(ctx, n)
	if err != nil {
		return healthFigures{}, err
	}
	f.Ready = ready.Sub(began)
	if err := sleep(ctx, settle); err != nil { // events are sent asynchronously
		return healthFigures{}, err
	}
	f.Requests, err = countRequests(e.auditLog, e.user, began, time.Now())
	return f, err
}

// markRollout gives d the status the Deployment controller writes once its
// pods are created (not available yet), or once they are available.
func markRollout(d *appsv1.Deployment, available bool) {
	replicas := int32(1)
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	now := metav1.Now()
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation,
		Replicas:           replicas, UpdatedReplicas: replicas, UnavailableReplicas: replicas,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable", LastUpdateTime: now, LastTransitionTime: now},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "ReplicaSetUpdated", LastUpdateTime: now, LastTransitionTime: now},
		},
	}
	if available {
		d.Status.ReadyReplicas, d.Status.AvailableReplicas, d.Status.UnavailableReplicas = replicas, replicas, 0
		d.Status.Conditions[0].Status, d.Status.Conditions[0].Reason = corev1.ConditionTrue, "MinimumReplicasAvailable"
		d.Status.Conditions[1].Reason = "NewReplicaSetAvailable"
	}
}

// waitHealthy returns when every one of the n MyWebs is Ready and healthy,
// as the watcher's cache holds them (no request to the API server).
func (w *watcher) waitHealthy(ctx context.Context, n int) (time.Time, error) {
	timeout := time.After(convergeTimeout(n))
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		webs := &operatorv1.MyWebList{}
		if err := w.cache.List(ctx, webs); err != nil {
			return time.Time{}, err
		}
		healthy := 0
		for i := range webs.Items {
			if isHealthy(&webs.Items[i]) {
				healthy++
			}
		}
		if healthy == n {
			return time.Now(), nil
		}
		select {
		case <-tick.C:
		case <-timeout:
			return time.Time{}, fmt.Errorf("%d of %d MyWebs Ready within %s of their Deployments becoming available", healthy, n, convergeTimeout(n))
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
}
