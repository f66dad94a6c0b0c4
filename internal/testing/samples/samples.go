// Package samples is stencil's own sample kinds (package templates, the
// kinds the seed documents build by hand) as the command line takes them:
// for this repository's tests, benchmarks and tools. No binary links it:
// stencil's own (main.go) registers the same kinds through pkg/stencil,
// and package kinds and the command line take a project's kinds as a
// value.
package samples

import (
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/stencil-operator/stencil/internal/operator/kinds"
	"github.com/stencil-operator/stencil/render"
	"github.com/stencil-operator/stencil/templates"
)

// Name is the operator's name stencil's own binary runs under.
const Name = "stencil"

// Set is the sample kinds and decorators, as stencil's binary registers
// them (main.go, through pkg/stencil).
func Set() kinds.Set {
	defs := make([]render.Definition, len(templates.Kinds))
	for i, k := range templates.Kinds {
		defs[i] = render.Definition(k)
	}
	decorators := make([]render.DecoratorDefinition, len(templates.Decorators))
	for i, d := range templates.Decorators {
		decorators[i] = render.DecoratorDefinition(d)
	}
	return kinds.NewSet(Name, defs, decorators)
}

// Definitions is every sample kind.
func Definitions() []render.Definition { return Set().Kinds }

// Load parses every sample kind's templates.
func Load() ([]*render.Kind, error) { return Set().Load() }

// LoadDecorators parses every sample decorator's templates.
func LoadDecorators() ([]*render.Decorator, error) { return Set().LoadDecorators() }

// Folders parses every sample kind's and decorator's folder (see
// kinds.Set.Folders).
func Folders(dir string) ([]kinds.Folder, error) { return Set().Folders(dir) }

// AddToScheme adds every sample kind's Go types to s.
func AddToScheme(s *runtime.Scheme) error { return Set().AddTo(s) }
