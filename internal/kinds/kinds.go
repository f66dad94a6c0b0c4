// Package kinds holds one operator's registered kinds (a Set: each kind's
// Go type with its folder of templates, the decorators, the schemes) and
// what stencil does with them as a whole: load and check the folders,
// generate the RBAC and admission policy they need. Everything else about
// a kind lives in its templates. Samples is this repository's set.
package kinds

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/stencil-operator/stencil/render"
	"github.com/stencil-operator/stencil/templates"
)

// Set is one operator's kinds and decorators, as a project registers them
// (stencil.Project).
type Set struct {
	// Name is the operator's: it prefixes its cluster-wide objects'
	// names (the ClusterRole, the admission policies, the Lease).
	Name        string
	Kinds       []render.Definition
	Decorators  []render.DecoratorDefinition
	AddToScheme []func(*runtime.Scheme) error
	// Setup adds the project's own Go controllers, webhooks and runnables
	// to the operator's manager (nil: none).
	Setup func(manager.Manager) error
}

// NewSet is the set of the operator named name ("stencil" when empty).
func NewSet(name string, ks []render.Definition, decorators []render.DecoratorDefinition, schemes []func(*runtime.Scheme) error) Set {
	if name == "" {
		name = "stencil"
	}
	return Set{Name: name, Kinds: ks, Decorators: decorators, AddToScheme: schemes}
}

// Samples is this repository's set: the sample kinds of package templates.
func Samples() Set {
	return Set{Name: "stencil", Kinds: templates.Kinds, Decorators: templates.Decorators, AddToScheme: templates.AddToScheme}
}

// Definitions returns every registered kind.
func (s Set) Definitions() []render.Definition { return s.Kinds }

// AddTo adds every registered kind's types to sch.
func (s Set) AddTo(sch *runtime.Scheme) error {
	for _, add := range s.AddToScheme {
		if err := add(sch); err != nil {
			return err
		}
	}
	for _, def := range s.Kinds {
		gvk := def.GroupVersionKind
		list := gvk.GroupVersion().WithKind(gvk.Kind + "List")
		if !sch.Recognizes(gvk) || !sch.Recognizes(list) {
			return fmt.Errorf("kind %s: its Go types (%s, %s) are not in the project's AddToScheme: add the AddToScheme of its API package (api/<group>/<version>) beside the kind (templates/kinds.go)", gvk.Kind, gvk, list.Kind)
		}
	}
	return nil
}

// Load parses every registered kind's templates; an error here fails
// start-up.
func (s Set) Load() ([]*render.Kind, error) {
	var loaded []*render.Kind
	for _, def := range s.Kinds {
		k, err := render.Load(def)
		if err != nil {
			return nil, err
		}
		loaded = append(loaded, k)
	}
	return loaded, nil
}

// LoadDecorators parses every registered decorator's templates; an error
// here fails start-up.
func (s Set) LoadDecorators() ([]*render.Decorator, error) {
	var loaded []*render.Decorator
	for _, d := range s.Decorators {
		dec, err := render.LoadDecorator(d.Name, d.Templates)
		if err != nil {
			return nil, err
		}
		loaded = append(loaded, dec)
	}
	return loaded, nil
}

// HasShortName reports whether name is one of kind's short names.
func (s Set) HasShortName(kind, name string) bool {
	for _, def := range s.Kinds {
		if def.GroupVersionKind.Kind == kind && slices.Contains(def.ShortNames, name) {
			return true
		}
	}
	return false
}

// The sample set's, for this repository's tests and tools.

// Definitions returns every sample kind.
func Definitions() []render.Definition { return Samples().Definitions() }

// AddToScheme adds every sample kind's types to s.
func AddToScheme(s *runtime.Scheme) error { return Samples().AddTo(s) }

// Load parses every sample kind's templates.
func Load() ([]*render.Kind, error) { return Samples().Load() }

// LoadDecorators parses every sample decorator's templates.
func LoadDecorators() ([]*render.Decorator, error) { return Samples().LoadDecorators() }
