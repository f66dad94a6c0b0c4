// Package kinds is the one place where stencil's kinds are registered: each
// entry pairs a kind's Go type (api/<group>/<version>) with its folder of
// templates (templates/<kind>). Everything else about a kind lives in its
// templates.
package kinds

import (
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/stencil-operator/stencil/render"
)

// registry lists the shipped kinds. The seed kinds are added here, one line
// each.
var registry []render.Definition

// schemes add the kinds' Go types to a scheme, one per API group.
var schemes []func(*runtime.Scheme) error

// Definitions returns every registered kind.
func Definitions() []render.Definition { return registry }

// AddToScheme adds every registered kind's types to s.
func AddToScheme(s *runtime.Scheme) error {
	for _, add := range schemes {
		if err := add(s); err != nil {
			return err
		}
	}
	return nil
}

// Load parses every registered kind's templates; an error here fails
// start-up.
func Load() ([]*render.Kind, error) {
	var loaded []*render.Kind
	for _, def := range registry {
		k, err := render.Load(def)
		if err != nil {
			return nil, err
		}
		loaded = append(loaded, k)
	}
	return loaded, nil
}
