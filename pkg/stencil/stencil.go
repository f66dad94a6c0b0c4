package stencil

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/internal/cli"
	"github.com/stencil-operator/stencil/internal/operator/kinds"
	"github.com/stencil-operator/stencil/render"
)

// Kind registers one kind of custom resource, in one entry of the
// project's templates/kinds.go: its Go type, how to add that type to a
// scheme, and its folder of templates.
//
//	{GroupVersionKind: cachev1.GroupVersion.WithKind("Memcached"),
//		New:         func() v1alpha1.Object { return &cachev1.Memcached{} },
//		AddToScheme: cachev1.AddToScheme,
//		Templates:   Kind("memcached")},
type Kind struct {
	// GroupVersionKind names the custom resource: its API group, the
	// version its templates read (with several versions, the hub, which
	// the API server stores) and its kind.
	GroupVersionKind schema.GroupVersionKind
	// New returns an empty custom resource of the kind: a value of its Go
	// type (api/<group>/<version>, with kubebuilder markers for its CRD).
	New func() v1alpha1.Object
	// AddToScheme adds the kind's Go types (the kind and its list) to a
	// scheme: the AddToScheme of its API package. Kinds of one package
	// name the same function; it is called once per kind, which is
	// harmless. A kind whose types it does not add stops the operator at
	// start, saying so.
	AddToScheme func(*runtime.Scheme) error
	// Templates is the kind's folder, usually embedded (go:embed): *.yaml
	// templates, a _kind.yaml declaring the types they emit, optional
	// _*.tpl helpers, _status.yaml, conversion templates and tests/.
	Templates fs.FS
	// ShortNames are the kind's short names, as its CRD declares them
	// (+kubebuilder:resource:shortName): `stencil drift` accepts them.
	ShortNames []string
}

// Decorator registers a decorator: a folder of templates whose parent is
// an existing type (its _decorator.yaml names the type), with no Go type
// of its own. It runs only when the operator's --decorators flag names it.
type Decorator struct {
	// Name is the decorator's name, as --decorators names it.
	Name string
	// Templates is the decorator's folder: *.yaml templates, a
	// _decorator.yaml and optional _*.tpl helpers.
	Templates fs.FS
}

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
	// Setup, when set, adds the project's own Go code to the manager that
	// runs its templates, once the kinds' controllers are set up and
	// before it starts: a controller (ctrl.NewControllerManagedBy(mgr)),
	// a webhook (mgr.GetWebhookServer().Register), any runnable (mgr.Add).
	// It shares the manager's client, scheme (with the kinds' types),
	// metrics and leader election: a runnable runs
	// on the leader unless it says it needs no election (under --shards,
	// on each shard's leader). Types of your own that the kinds do not add
	// are added here, to mgr.GetScheme(). The manager's cache holds only stencil's
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

// Run runs the command line args (without the program's name) in this
// process, until ctx ends (the operator) or the command is done, writing
// its output to out (nil: standard output and error). It keeps nothing of
// the process for itself (no environment variable, no signal handler, no
// global logger of controller-runtime's set after the first): a test may
// call it more than once, and several at once, each with its own
// --kubeconfig.
func (p Project) Run(ctx context.Context, args []string, out io.Writer) error {
	if p.Name == "" {
		return errors.New("stencil.Project has no Name: set it to your operator's name")
	}
	return cli.Run(ctx, p.set(), args, out)
}

// set is the project as the command line takes it.
func (p Project) set() kinds.Set {
	defs := make([]render.Definition, len(p.Kinds))
	for i, k := range p.Kinds {
		defs[i] = render.Definition(k)
	}
	decorators := make([]render.DecoratorDefinition, len(p.Decorators))
	for i, d := range p.Decorators {
		decorators[i] = render.DecoratorDefinition(d)
	}
	return kinds.Set{Name: p.Name, Kinds: defs, Decorators: decorators, Setup: p.Setup}
}
