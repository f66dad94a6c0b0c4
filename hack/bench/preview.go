package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// previewFigures: what `stencil diff --all` (the upgrade preview) costs
// over the converged MyWebs.
type previewFigures struct {
	Took     time.Duration `json:"tookNanoseconds"`
	Requests requests      `json:"requests"`
	// Exit is its exit code; Summary its MyWeb line.
	Exit    int    `json:"exit"`
	Summary string `json:"summary"`
}

// measurePreview runs `stencil diff --all` with stencil's own kubeconfig
// against the converged cluster (the operator sends nothing at rest, so the
// user's requests meanwhile are the preview's) and times it.
func measurePreview(ctx context.Context, cfg config, e *env) (previewFigures, error) {
	began := time.Now()
	cmd := contenderCommand(ctx, filepath.Join(cfg.bin, "stencil"), "diff", "--all")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.kubeconfig)
	out, err := cmd.Output()
	f := previewFigures{Took: time.Since(began)}
	if exit, ok := errors.AsType[*exec.ExitError](err); ok {
		f.Exit, err = exit.ExitCode(), nil
	}
	if err != nil {
		return f, fmt.Errorf("stencil diff --all: %w", err)
	}
	if f.Exit > 1 {
		return f, fmt.Errorf("stencil diff --all: exit %d: %s", f.Exit, out)
	}
	for line := range strings.SplitSeq(string(out), "\n") {
		if strings.HasPrefix(line, "MyWeb ") {
			f.Summary = strings.Join(strings.Fields(line), " ")
		}
	}
	if err := sleep(ctx, settle); err != nil {
		return f, err
	}
	f.Requests, err = countRequests(e.auditLog, "stencil", began, time.Now())
	return f, err
}
