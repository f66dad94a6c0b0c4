package stencil_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/stencil-operator/stencil/pkg/stencil"
	"github.com/stencil-operator/stencil/templates"
)

// A project's main.go: its kinds, registered in its templates/kinds.go
// (stencil's own samples here), and one call that runs the operator or the
// subcommand named on the command line.
func Example() {
	project := stencil.Project{
		Name:       "widgets",
		Kinds:      templates.Kinds,
		Decorators: templates.Decorators,
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
// scheme, metrics and leader election). The manager's cache holds only
// stencil's own objects: the controller watches and reads through a cache
// of its own. pkg/stenciltest's TestAGoControllerBesideTheTemplates runs
// one like it on a local control plane (docs/go-beside-templates.md).
func ExampleProject_setup() {
	project := stencil.Project{
		Name:  "widgets",
		Kinds: templates.Kinds,
		Setup: func(mgr manager.Manager) error {
			own, err := cache.New(mgr.GetConfig(), cache.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
			if err != nil {
				return err
			}
			if err := mgr.Add(own); err != nil {
				return err
			}
			return ctrl.NewControllerManagedBy(mgr).Named("audit").
				WatchesRawSource(source.Kind(own, &corev1.ConfigMap{}, &handler.TypedEnqueueRequestForObject[*corev1.ConfigMap]{})).
				Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
					// Your Go code: read through own, write through
					// mgr.GetClient() with a field owner of your own.
					return reconcile.Result{}, nil
				}))
		},
	}
	_ = project // func main() { stencil.Main(project) }
}
