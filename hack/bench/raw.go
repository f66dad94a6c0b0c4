package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/types"

	operatorv1 "github.com/stencil-operator/stencil/api/operator/v1"
	"github.com/stencil-operator/stencil/internal/kinds"
	"github.com/stencil-operator/stencil/render"
)

// measureRaw: the raw loop applies what stencil's templates render for the
// same MyWebs, each object once, and exits.
func measureRaw(ctx context.Context, cfg config, n int, rawapply string) (_ *result, err error) {
	e, err := startEnv(ctx, cfg, "rawapply")
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, e.stop()) }()
	objects := filepath.Join(e.dir, "objects.jsonl")
	if err := writeRendered(objects, myWebs(n, cfg.namespaces)); err != nil {
		return nil, err
	}
	cmd := command(ctx, rawapply, "-f", objects, "-kubeconfig", e.kubeconfig, "-workers", fmt.Sprint(cfg.workers))
	var out bytes.Buffer
	cmd.Stdout = &out
	profiled := make(chan error, 1)
	if n == cfg.cpuProfileAt {
		go func() { profiled <- e.profileAPIServer(ctx, cfg.out, fmt.Sprintf("apiserver-raw-%d", n)) }()
	} else {
		profiled <- nil
	}
	controlPlane := e.controlPlaneCPU()
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("rawapply: %w", err)
	}
	end := time.Now()
	r := &result{Contender: "raw loop", N: n, Converge: end.Sub(start), ControlPlaneCPUSeconds: e.controlPlaneCPU() - controlPlane}
	if r.PeakRSSKiB, r.FileRSSKiB, err = parseMemory(out.String()); err != nil {
		return nil, fmt.Errorf("rawapply's peak RSS: %w", err)
	}
	usage := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	r.CPUSeconds = (time.Duration(usage.Utime.Nano()) + time.Duration(usage.Stime.Nano())).Seconds()
	if err := <-profiled; err != nil {
		return nil, err
	}
	if r.Requests, err = countRequests(e.auditLog, "rawapply", start, end); err != nil {
		return nil, err
	}
	return r, countOwned(ctx, e.admin, n)
}

// writeRendered renders each MyWeb as stencil would (the UID stands in for
// the one the API server would give it) and writes the objects, one JSON
// object per line.
func writeRendered(path string, webs []*operatorv1.MyWeb) error {
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
	for i, web := range webs {
		web.UID = types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i))
		web.Generation = 1
		objs, err := kind.Render(web)
		if err != nil {
			return errors.Join(err, f.Close())
		}
		for _, o := range objs {
			if err := enc.Encode(o.Object); err != nil {
				return errors.Join(err, f.Close())
			}
		}
	}
	return errors.Join(w.Flush(), f.Close())
}

func myWebKind() (*render.Kind, error) {
	loaded, err := kinds.Load()
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
