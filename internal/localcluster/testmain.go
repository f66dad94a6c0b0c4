package localcluster

import (
	"context"
	"fmt"
	"os"
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
