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
	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// healthFigures: what it costs stencil to see its objects become healthy.
type healthFigures struct {
	// Marked is how long the bench took to mark every Deployment available.
	Marked time.Duration `json:"markedNanoseconds"`
	// Ready is from the first mark until every MyWeb was Ready.
	Ready time.Duration `json:"readyNanoseconds"`
	// Requests are stencil's meanwhile.
	Requests requests `json:"requests"`
}

// measureHealth stands in for the Deployment controller that the bench's
// control plane does not run: it marks every MyWeb's Deployment available
// (status written as that controller writes it) and times until every
// MyWeb is Ready, counting stencil's requests meanwhile. Health costs
// stencil no polling: each Deployment's status event brings its MyWeb back,
// and its status changes once.
func measureHealth(ctx context.Context, e *env, w *watcher, n int) (healthFigures, error) {
	list := &appsv1.DeploymentList{}
	if err := e.admin.List(ctx, list, client.MatchingLabels{v1alpha1.LabelManagedBy: v1alpha1.ManagedByStencil}); err != nil {
		return healthFigures{}, err
	}
	if len(list.Items) != n {
		return healthFigures{}, fmt.Errorf("%d Deployments, want %d", len(list.Items), n)
	}
	began := time.Now()
	err := inParallel(list.Items, func(d appsv1.Deployment) error {
		markAvailable(&d)
		return e.admin.Status().Update(ctx, &d, client.FieldOwner("bench-deployment-controller"))
	})
	if err != nil {
		return healthFigures{}, fmt.Errorf("marking the Deployments available: %w", err)
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
	f.Requests, err = countRequests(e.auditLog, "stencil", began, time.Now())
	return f, err
}

// markAvailable gives d the status the Deployment controller writes once
// all its replicas are available.
func markAvailable(d *appsv1.Deployment) {
	replicas := int32(1)
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	now := metav1.Now()
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation,
		Replicas:           replicas, UpdatedReplicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", LastUpdateTime: now, LastTransitionTime: now},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", LastUpdateTime: now, LastTransitionTime: now},
		},
	}
}

// waitHealthy returns when every one of the n MyWebs is Ready and healthy,
// as the watcher's cache holds them (no request to the API server).
func (w *watcher) waitHealthy(ctx context.Context, n int) (time.Time, error) {
	timeout := time.After(convergeTimeout)
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
			return time.Time{}, fmt.Errorf("%d of %d MyWebs Ready within %s of their Deployments becoming available", healthy, n, convergeTimeout)
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
}
