package stencil

import (
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/stencil-operator/stencil/internal/cli"
	"github.com/stencil-operator/stencil/internal/kinds"
	"github.com/stencil-operator/stencil/render"
)

// Kind registers a kind: its GroupVersionKind, a constructor of its Go
// type, its folder of templates (*.yaml templates, a _kind.yaml, optional
// _*.tpl helpers, _status.yaml and tests/) and its short names.
type Kind = render.Definition

// Decorator registers a decorator: its name and folder of templates (a
// _decorator.yaml names the existing type it decorates).
type Decorator = render.DecoratorDefinition

// Project is an operator: its name and its kinds.
type Project struct {
	// Name is the operator's name, e.g. "widgets" (required): the
	// command's in help, and the prefix of its cluster-wide objects'
	// names (<name>-manager, <name>-graph-deletion) and of its leader
	// election Lease (<name>.stencil.dev), so that two operators on one
	// cluster never share one.
	Name string
	// Kinds are the custom resource kinds the operator reconciles.
	Kinds []Kind
	// Decorators are the folders that decorate existing types; each runs
	// only when --decorators names it.
	Decorators []Decorator
	// AddToScheme adds the kinds' Go types to a scheme: one function per
	// API group (the AddToScheme of api/<group>/<version>).
	AddToScheme []func(*runtime.Scheme) error
	// Setup, when set, adds the project's own Go code to the manager that
	// runs its templates, once the kinds' controllers are set up and
	// before it starts: a controller (ctrl.NewControllerManagedBy(mgr)),
	// any runnable (mgr.Add). It shares the manager's client, scheme (with
	// AddToScheme's types), metrics and leader election: a runnable runs
	// on the leader unless it says it needs no election (under --shards,
	// on each shard's leader). The manager's cache holds only stencil's
	// own objects: watch and read others through a cache of your own
	// (docs/go-beside-templates.md). An error stops the operator before it
	// starts. Subcommands other than the operator (render, lint, test…)
	// do not call it.
	Setup func(mgr manager.Manager) error
}

// Main runs the project's command line (os.Args) and exits with its code.
func Main(p Project) { os.Exit(p.Execute()) }

// Execute runs the project's command line (os.Args) and returns the exit
// code: 0 on success, 1 when a diff found differences or a command failed.
func (p Project) Execute() int {
	if p.Name == "" {
		fmt.Fprintln(os.Stderr, "Error: stencil.Project has no Name: set it (main.go) to your operator's name")
		return 1
	}
	return cli.Execute(p.set())
}

func (p Project) set() kinds.Set {
	s := kinds.NewSet(p.Name, p.Kinds, p.Decorators, p.AddToScheme)
	s.Setup = p.Setup
	return s
}
