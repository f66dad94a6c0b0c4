// Command stencil is a Kubernetes operator whose resource logic lives in
// templates: it renders each custom resource into manifests, applies them
// with server-side apply, prunes what is no longer rendered and reports drift
// in the resource's status.
package main

import (
	"os"

	"github.com/stencil-operator/stencil/internal/cli"
)

func main() {
	os.Exit(cli.Execute())
}
