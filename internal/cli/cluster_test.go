package cli

import (
	"testing"

	"github.com/stencil-operator/stencil/internal/dev/localcluster"
)

// startAPIServer starts a local kube-apiserver and etcd (no controllers)
// for the test, stopped when it ends.
func startAPIServer(t *testing.T) *localcluster.Cluster {
	t.Helper()
	cluster, err := localcluster.Start(t.Context(), localcluster.Options{APIServerOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.Stop(); err != nil {
			t.Error(err)
		}
	})
	return cluster
}
