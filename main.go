// Command stencil is a Kubernetes operator whose resource logic lives in
// templates: it renders each custom resource into manifests, applies them
// with server-side apply, prunes what is no longer rendered and reports drift
// in the resource's status. It is built, as a project made by `stencil init`
// is, from the public API (package pkg/stencil) and its sample kinds.
package main

import (
	"github.com/stencil-operator/stencil/pkg/stencil"
	"github.com/stencil-operator/stencil/templates"
)

func main() {
	stencil.Main(stencil.Project{
		Name:       "stencil",
		Kinds:      templates.Kinds,
		Decorators: templates.Decorators,
	})
}
