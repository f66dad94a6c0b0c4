package stencil_test

import (
	"fmt"

	"github.com/stencil-operator/stencil/pkg/stencil"
	"github.com/stencil-operator/stencil/templates"
)

// A project's main.go: its kinds, registered in its templates/kinds.go
// (stencil's own samples here), and one call that runs the operator or the
// subcommand named on the command line.
func Example() {
	project := stencil.Project{
		Name:        "widgets",
		Kinds:       templates.Kinds,
		Decorators:  templates.Decorators,
		AddToScheme: templates.AddToScheme,
	}
	for _, k := range project.Kinds[:2] {
		fmt.Println(k.GroupVersionKind.Kind)
	}
	// func main() { stencil.Main(project) }

	// Output:
	// Memcached
	// MyWeb
}
