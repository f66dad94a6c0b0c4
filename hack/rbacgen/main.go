// Command rbacgen writes config/rbac/role.yaml, the operator's ClusterRole,
// from the registered kinds' declarations. `make manifests` runs it.
package main

import (
	"fmt"
	"os"

	"github.com/stencil-operator/stencil/internal/kinds"
)

func main() {
	loaded, err := kinds.Load()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	decorators, err := kinds.LoadDecorators()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out, err := kinds.ClusterRoleYAML(loaded, decorators)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	path := "config/rbac/role.yaml"
	if len(os.Args) > 1 {
		path = os.Args[1]
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
