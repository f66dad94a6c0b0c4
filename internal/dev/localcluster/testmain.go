package localcluster

import (
	"context"
	"fmt"
	"os"
	"sync"
)

// TestingM is the part of *testing.M that RunTests needs.
type TestingM interface{ Run() int }

// RunTests starts one cluster for a test package, stores it in *cluster, runs
// the package's tests and stops the cluster. Use it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(localcluster.RunTests(m, localcluster.Options{}, &cluster)) }
func RunTests(m TestingM, opts Options, cluster **Cluster) int {
	c, err := Start(context.Background(), opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the local control plane: %v\n", err)
		return 1
	}
	*cluster = c
	code := m.Run()
	if err := c.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping the local control plane: %v\n", err)
		return max(code, 1)
	}
	return code
}

// PIDs returns the process IDs of the running components, by name.
func (c *Cluster) PIDs() map[string]int {
	pids := make(map[string]int, len(c.processes))
	for _, p := range c.processes {
		pids[p.name] = p.cmd.Process.Pid
	}
	return pids
}

// Lazy is a test package's cluster, started by the first test that asks for
// it, so that a run of the package's unit tables alone (go test -run
// TestDecide) starts no control plane. Use it from TestMain:
//
//	var cluster = localcluster.Lazy{SetUp: setUp}
//	func TestMain(m *testing.M) { os.Exit(cluster.RunTests(m)) }
//
// and call cluster.Get(t) in every test, or test helper, that talks to it.
type Lazy struct {
	// Options are the cluster's options.
	Options Options
	// SetUp, if set, runs once after the cluster starts (installing CRDs,
	// making clients, starting an operator); its error fails every test that
	// asks for the cluster. Its context ends when the tests have run, before
	// the cluster stops.
	SetUp func(context.Context, *Cluster) error

	once    sync.Once
	cluster *Cluster
	err     error
	cancel  context.CancelFunc
}

// Fataler is the part of testing.TB that Lazy.Get needs.
type Fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Get returns the cluster, starting it and running SetUp the first time.
func (l *Lazy) Get(t Fataler) *Cluster {
	t.Helper()
	l.once.Do(func() {
		l.cluster, l.err = Start(context.Background(), l.Options)
		if l.err != nil {
			l.err = fmt.Errorf("starting the local control plane: %w", l.err)
			return
		}
		var ctx context.Context
		ctx, l.cancel = context.WithCancel(context.Background())
		if l.SetUp != nil {
			if err := l.SetUp(ctx, l.cluster); err != nil {
				l.err = fmt.Errorf("setting up the local control plane: %w", err)
			}
		}
	})
	if l.err != nil {
		t.Fatalf("%v", l.err)
	}
	return l.cluster
}

// RunTests runs the package's tests and stops the cluster if one of them
// started it.
func (l *Lazy) RunTests(m TestingM) int {
	code := m.Run()
	if l.cluster == nil {
		return code
	}
	l.cancel()
	if err := l.cluster.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping the local control plane: %v\n", err)
		return max(code, 1)
	}
	return code
}
