package localcluster

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"k8s.io/client-go/rest"
)

// Restart kills a running component (SIGKILL, as a crash or an OOM kill
// would), waits down, starts it again with the same binary, flags, ports and
// data, and waits until it is ready again: etcd healthy, kube-apiserver
// ready. The other components reconnect by themselves. Fault tests use it.
func (c *Cluster) Restart(ctx context.Context, name string, down time.Duration) error {
	i := c.index(name)
	if i < 0 {
		return fmt.Errorf("no component %q in this cluster", name)
	}
	p := c.processes[i]
	if err := p.cmd.Process.Kill(); err != nil {
		return fmt.Errorf("killing %s: %w", name, err)
	}
	<-p.exited
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(down):
	}
	again, err := startProcess(name, p.cmd.Path, p.logPath+".restarted", p.cmd.Args[1:]...)
	if err != nil {
		return err
	}
	c.processes[i] = again
	return c.waitReady(ctx, name)
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
		url := ""
		for _, a := range c.processes[c.index(name)].cmd.Args {
			if v, ok := strings.CutPrefix(a, "--listen-client-urls="); ok {
				url = v
			}
		}
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
