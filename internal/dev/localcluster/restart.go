package localcluster

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
)

// Restart kills a running component (SIGKILL, as a crash or an OOM kill
// would), waits down and starts it again (see Kill and Start). The other
// components reconnect by themselves. Fault tests use it.
func (c *Cluster) Restart(ctx context.Context, name string, down time.Duration, flags ...string) error {
	if err := c.Kill(name); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(down):
	}
	return c.Start(ctx, name, flags...)
}

// Kill kills a component with SIGKILL and waits until it exited (at once
// when it already had).
func (c *Cluster) Kill(name string) error {
	i := c.index(name)
	if i < 0 {
		return fmt.Errorf("no component %q in this cluster", name)
	}
	p := c.processes[i]
	select {
	case <-p.exited:
		return nil // already gone
	default:
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing %s: %w", name, err)
	}
	<-p.exited
	return nil
}

// Start starts a component that Kill stopped again, with the same binary,
// ports and data, and waits until it is ready: etcd healthy, kube-apiserver
// ready. It runs with the flags of the component's first start, but for
// flags ("--name=value"), which replace the first start's flags of the same
// name or are added; a Start without flags restores the first start's.
func (c *Cluster) Start(ctx context.Context, name string, flags ...string) error {
	i := c.index(name)
	if i < 0 {
		return fmt.Errorf("no component %q in this cluster", name)
	}
	p := c.processes[i]
	if err := p.running(); err == nil {
		return fmt.Errorf("%s is running; Kill it first", name)
	}
	base := p.base
	if base == nil {
		base = p.cmd.Args[1:]
	}
	c.restarts++
	again, err := startProcess(name, p.cmd.Path, c.path("logs", fmt.Sprintf("%s.restart-%d.log", name, c.restarts)), override(base, flags)...)
	if err != nil {
		return err
	}
	again.base = base
	c.processes[i] = again
	return c.waitReady(ctx, name)
}

// override is args with each of flags ("--name=value") in place of the
// argument of the same name, or added.
func override(args, flags []string) []string {
	out := slices.Clone(args)
	for _, f := range flags {
		name, _, _ := strings.Cut(f, "=")
		i := slices.IndexFunc(out, func(a string) bool { return strings.HasPrefix(a, name+"=") })
		if i < 0 {
			out = append(out, f)
			continue
		}
		out[i] = f
	}
	return out
}

// index is the position of the component name in c.processes, or -1.
func (c *Cluster) index(name string) int {
	for i, p := range c.processes {
		if p.name == name {
			return i
		}
	}
	return -1
}

// waitReady waits until a restarted component answers as Start waited for.
func (c *Cluster) waitReady(ctx context.Context, name string) error {
	switch name {
	case "etcd":
		url := c.etcdURL()
		return c.waitFor(ctx, name, func(ctx context.Context) error { return httpOK(ctx, http.DefaultClient, url+"/health") })
	case "kube-apiserver":
		transport, err := rest.TransportFor(c.Config)
		if err != nil {
			return fmt.Errorf("building admin transport: %w", err)
		}
		client := &http.Client{Transport: transport, Timeout: 5 * time.Second}
		return c.waitFor(ctx, name, func(ctx context.Context) error { return httpOK(ctx, client, c.Server+"/readyz") })
	}
	return nil
}

// etcdURL is etcd's client URL.
func (c *Cluster) etcdURL() string {
	for _, a := range c.processes[c.index("etcd")].cmd.Args {
		if v, ok := strings.CutPrefix(a, "--listen-client-urls="); ok {
			return v
		}
	}
	return ""
}

// CompactEtcd drops etcd's history up to its current revision (through
// etcd's JSON gateway), as the API server's periodic compaction does: a
// watch that resumes from an older resourceVersion then fails with 410
// Gone and its client must list again. It returns the revision.
func (c *Cluster) CompactEtcd(ctx context.Context) (int64, error) {
	var rng struct {
		Header struct {
			Revision int64 `json:"revision,string"`
		} `json:"header"`
	}
	// A range of any key answers with the store's current revision.
	if err := etcdCall(ctx, c.etcdURL()+"/v3/kv/range", map[string]any{"key": base64.StdEncoding.EncodeToString([]byte("/"))}, &rng); err != nil {
		return 0, err
	}
	rev := rng.Header.Revision
	if err := etcdCall(ctx, c.etcdURL()+"/v3/kv/compaction", map[string]any{"revision": strconv.FormatInt(rev, 10), "physical": true}, nil); err != nil {
		return 0, err
	}
	return rev, nil
}

// etcdCall posts request as JSON to etcd's gateway at url and decodes the
// answer into response (when not nil).
func etcdCall(ctx context.Context, url string, request, response any) error {
	body, err := json.Marshal(request)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("calling etcd: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("reading etcd's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s: %s: %s", url, resp.Status, answer)
	}
	if response == nil {
		return nil
	}
	if err := json.Unmarshal(answer, response); err != nil {
		return fmt.Errorf("decoding etcd's answer %s: %w", answer, err)
	}
	return nil
}
