package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1 "github.com/stencil-operator/stencil/api/operator/v1"
	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/internal/testing/samples"
	"github.com/stencil-operator/stencil/render"
)

// The raw loops. The plain one applies what stencil's templates render for
// the same MyWebs, each object once, and exits. The one with status also
// writes each MyWeb's status once its objects are applied: the floor of any
// operator that marks each resource Ready for its generation, as the bench
// requires of stencil.
const (
	rawLoop       = "raw loop"
	rawLoopStatus = "raw loop + status"
)

// measureRaw runs one of the raw loops. For the loop with status the MyWebs
// exist before it starts, as they do for stencil.
func measureRaw(ctx context.Context, cfg config, n int, bins programs, withStatus bool) (_ *result, err error) {
	e, err := startEnv(ctx, cfg, "rawapply")
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, e.stop()) }()
	webs := myWebs(n, cfg.namespaces)
	contender := rawLoop
	if withStatus {
		contender = rawLoopStatus
		if err := createAll(ctx, e.admin, webs); err != nil {
			return nil, fmt.Errorf("creating MyWebs: %w", err)
		}
	}
	jobs := filepath.Join(e.dir, "jobs.jsonl")
	if err := writeJobs(jobs, webs, withStatus); err != nil {
		return nil, err
	}
	cmd := contenderProgram(ctx, bins.rawapply, "-f", jobs, "-kubeconfig", e.kubeconfig, "-workers", fmt.Sprint(cfg.workers))
	r, err := runChild(ctx, cfg, e, contender, n, cmd)
	if err != nil {
		return nil, err
	}
	if err := countOwned(ctx, e.admin, n); err != nil {
		return nil, err
	}
	if withStatus {
		return r, allReady(ctx, e.admin, n)
	}
	return r, nil
}

// controllerRuntimeFloor is the bare controller-runtime manager
// (hack/bench/crbaseline): the memory that any such operator starts from.
const controllerRuntimeFloor = "controller-runtime floor"

// measureBaseline runs the bare manager until it has seen every MyWeb.
func measureBaseline(ctx context.Context, cfg config, n int, bins programs) (_ *result, err error) {
	e, err := startEnv(ctx, cfg, "crbaseline")
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, e.stop()) }()
	if err := createAll(ctx, e.admin, myWebs(n, cfg.namespaces)); err != nil {
		return nil, fmt.Errorf("creating MyWebs: %w", err)
	}
	return runChild(ctx, cfg, e, controllerRuntimeFloor, n, contenderProgram(ctx, bins.crbaseline, "-kubeconfig", e.kubeconfig, "-n", fmt.Sprint(n)))
}

// runChild runs a contender that exits once it has converged, and takes its
// figures: time, requests, CPU and memory (which it prints as it exits).
func runChild(ctx context.Context, cfg config, e *env, contender string, n int, cmd *exec.Cmd) (*result, error) {
	var out bytes.Buffer
	cmd.Stdout = &out
	profiled := make(chan error, 1)
	if n == cfg.cpuProfileAt {
		name := strings.NewReplacer(" + ", "-", " ", "-").Replace(contender)
		go func() {
			profiled <- e.profileAPIServer(ctx, cfg.out, fmt.Sprintf("apiserver-%s-%d", name, n), cfg.cpuProfileSeconds)
		}()
	} else {
		profiled <- nil
	}
	controlPlane, steal := e.controlPlaneCPU(), stealSeconds()
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %w", contender, err)
	}
	end := time.Now()
	r := &result{Contender: contender, N: n, Converge: end.Sub(start),
		ControlPlaneCPUSeconds: e.controlPlaneCPU() - controlPlane, StealSeconds: stealSeconds() - steal}
	var err error
	if r.PeakRSSKiB, r.FileRSSKiB, err = parseMemory(out.String()); err != nil {
		return nil, fmt.Errorf("%s's peak RSS: %w", contender, err)
	}
	usage := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	r.CPUSeconds = (time.Duration(usage.Utime.Nano()) + time.Duration(usage.Stime.Nano())).Seconds()
	if err := <-profiled; err != nil {
		return nil, err
	}
	if r.Requests, err = countRequests(e.auditLog, e.user, start, end); err != nil {
		return nil, err
	}
	return r, nil
}

// allReady checks that each of the n MyWebs is Ready for its generation
// (see isReady).
func allReady(ctx context.Context, c client.Client, n int) error {
	var webs operatorv1.MyWebList
	if err := c.List(ctx, &webs); err != nil {
		return err
	}
	ready := 0
	for i := range webs.Items {
		if isReady(&webs.Items[i]) {
			ready++
		}
	}
	if ready != n {
		return fmt.Errorf("%d of %d MyWebs Ready for their generation", ready, n)
	}
	return nil
}

// rawJob is one line of rawapply's input (see hack/bench/rawapply).
type rawJob struct {
	Objects []map[string]any `json:"objects"`
	Status  *rawStatus       `json:"status,omitempty"`
}

type rawStatus struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Namespace  string         `json:"namespace"`
	Name       string         `json:"name"`
	Patch      map[string]any `json:"patch"`
}

// writeJobs renders each MyWeb as stencil would (the UID stands in for the
// one the API server would give it) and writes one line per MyWeb: its
// objects and, withStatus, the status stencil would write.
func writeJobs(path string, webs []*operatorv1.MyWeb, withStatus bool) error {
	kind, err := myWebKind()
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	now := metav1.Now()
	for i, web := range webs {
		web := web.DeepCopy() // the MyWebs are created as they are
		web.UID = types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i))
		web.Generation = 1
		objs, err := kind.Render(web)
		if err != nil {
			return errors.Join(err, f.Close())
		}
		var j rawJob
		for _, o := range objs {
			j.Objects = append(j.Objects, o.Object)
		}
		if withStatus {
			// Not web's TypeMeta: creating it leaves that empty.
			j.Status = &rawStatus{APIVersion: operatorv1.GroupVersion.String(), Kind: "MyWeb", Namespace: web.Namespace, Name: web.Name,
				Patch: map[string]any{"status": readyStatus(objs, web.Generation, now)}}
		}
		if err := enc.Encode(j); err != nil {
			return errors.Join(err, f.Close())
		}
	}
	return errors.Join(w.Flush(), f.Close())
}

// readyStatus is the status stencil writes for a MyWeb that converged with
// objs applied and no drift, here where no Deployment becomes available
// (Ready False, Progressing): the same fields, reasons and messages, so
// the floor writes as much as stencil does. The messages restate the
// reconciler's (its status builder is internal); a difference would only
// change the size of the floor's write.
func readyStatus(objs []*unstructured.Unstructured, generation int64, now metav1.Time) map[string]any {
	var inventory []any
	deployment := ""
	for _, o := range objs {
		inventory = append(inventory, map[string]any{"apiVersion": o.GetAPIVersion(), "kind": o.GetKind(), "namespace": o.GetNamespace(), "name": o.GetName()})
		if o.GetKind() == "Deployment" {
			deployment = o.GetName()
		}
	}
	progressing := "All " + strconv.Itoa(len(objs)) + " rendered objects are applied, but 1 not ready yet: Deployment " + deployment +
		": Replicas: 0/1. stencil looks again when their status changes."
	condition := func(typ, status, reason, message string) map[string]any {
		return map[string]any{"type": typ, "status": status, "reason": reason, "message": message,
			"observedGeneration": generation, "lastTransitionTime": now.UTC().Format(time.RFC3339)}
	}
	return map[string]any{
		"observedGeneration": generation,
		"conditions": []any{
			condition(v1alpha1.ConditionReady, "False", v1alpha1.ReasonProgressing, progressing),
			condition(v1alpha1.ConditionReconciling, "True", v1alpha1.ReasonProgressing, progressing),
			condition(v1alpha1.ConditionDrifted, "False", v1alpha1.ReasonInSync, "Every field the templates set has the value they set."),
		},
		"inventory": inventory,
		"completed": false, // no Deployment becomes available here: the bench runs no controller manager
	}
}

func myWebKind() (*render.Kind, error) {
	loaded, err := samples.Load()
	if err != nil {
		return nil, err
	}
	for _, k := range loaded {
		if k.GroupVersionKind() == operatorv1.GroupVersion.WithKind("MyWeb") {
			return k, nil
		}
	}
	return nil, errors.New("no MyWeb kind")
}
