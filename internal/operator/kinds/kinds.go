// Package kinds holds one operator's registered kinds (a Set: each kind's
// Go type with its folder of templates, the decorators) and what stencil
// does with them as a whole: load and check the folders, generate the RBAC
// and admission policy they need. Everything else about a kind lives in
// its templates. This repository's own set, its sample kinds, is
// internal/testing/samples': nothing here links them.
package kinds

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/stencil-operator/stencil/render"
)

// Set is one operator's kinds and decorators, as a project registers them
// (stencil.Project).
type Set struct {
	// Name is the operator's: it prefixes its cluster-wide objects'
	// names (the ClusterRole, the admission policies, the Lease).
	Name       string
	Kinds      []render.Definition
	Decorators []render.DecoratorDefinition
	// Setup adds the project's own Go controllers, webhooks and runnables
	// to the operator's manager (nil: none).
	Setup func(manager.Manager) error
}

// NewSet is the set of the operator named name ("stencil" when empty).
func NewSet(name string, ks []render.Definition, decorators []render.DecoratorDefinition) Set {
	if name == "" {
		name = "stencil"
	}
	return Set{Name: name, Kinds: ks, Decorators: decorators}
}

// Definitions returns every registered kind.
func (s Set) Definitions() []render.Definition { return s.Kinds }

// AddTo adds every registered kind's types to sch, each by its own
// AddToScheme.
func (s Set) AddTo(sch *runtime.Scheme) error {
	for _, def := range s.Kinds {
		gvk := def.GroupVersionKind
		if def.AddToScheme == nil {
			return fmt.Errorf("kind %s has no AddToScheme: set it to the AddToScheme of its API package (api/<group>/<version>) in its entry of templates/kinds.go", gvk.Kind)
		}
		if err := def.AddToScheme(sch); err != nil {
			return fmt.Errorf("kind %s: adding its Go types to the scheme: %w", gvk.Kind, err)
		}
		list := gvk.GroupVersion().WithKind(gvk.Kind + "List")
		if !sch.Recognizes(gvk) || !sch.Recognizes(list) {
			return fmt.Errorf("kind %s: its AddToScheme does not add its Go types (%s, %s): set it to the AddToScheme of the API package that defines them (api/<group>/<version>) in its entry of templates/kinds.go", gvk.Kind, gvk, list.Kind)
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
