package stencil_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

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

// A project with a Go controller of its own beside its template kinds:
// Setup adds it to the manager that runs the templates (the same client,
// caches, metrics and leader election). pkg/stenciltest's
// TestAGoControllerBesideTheTemplates runs this on a local control plane.
func ExampleProject_setup() {
	project := stencil.Project{
		Name:        "widgets",
		Kinds:       templates.Kinds,
		AddToScheme: templates.AddToScheme,
		Setup: func(mgr manager.Manager) error {
			return ctrl.NewControllerManagedBy(mgr).Named("audit").
				For(&corev1.ConfigMap{}).
				Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
					// Your Go code: read and write through mgr.GetClient().
					return reconcile.Result{}, nil
				}))
		},
	}
	_ = project // func main() { stencil.Main(project) }
}
