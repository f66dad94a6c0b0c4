// Package kinds is the one place where stencil's kinds are registered: each
// entry pairs a kind's Go type (api/<group>/<version>) with its folder of
// templates (templates/<kind>). Everything else about a kind lives in its
// templates.
package kinds

import (
	"k8s.io/apimachinery/pkg/runtime"

	cachev1alpha1 "github.com/stencil-operator/stencil/api/cache/v1alpha1"
	flightsv1 "github.com/stencil-operator/stencil/api/flights/v1"
	operatorv1 "github.com/stencil-operator/stencil/api/operator/v1"
	samplecontrollerv1alpha1 "github.com/stencil-operator/stencil/api/samplecontroller/v1alpha1"
	stacksv1alpha1 "github.com/stencil-operator/stencil/api/stacks/v1alpha1"
	"github.com/stencil-operator/stencil/api/v1alpha1"
	webappv1 "github.com/stencil-operator/stencil/api/webapp/v1"
	"github.com/stencil-operator/stencil/render"
	"github.com/stencil-operator/stencil/templates"
)

// registry lists the shipped kinds, one line each: API group and kind, Go
// type, template folder.
var registry = []render.Definition{
	{GroupVersionKind: cachev1alpha1.GroupVersion.WithKind("Memcached"), New: func() v1alpha1.Object { return &cachev1alpha1.Memcached{} }, Templates: templates.Kind("memcached")},
	{GroupVersionKind: operatorv1.GroupVersion.WithKind("MyWeb"), New: func() v1alpha1.Object { return &operatorv1.MyWeb{} }, Templates: templates.Kind("myweb")},
	{GroupVersionKind: samplecontrollerv1alpha1.GroupVersion.WithKind("Foo"), New: func() v1alpha1.Object { return &samplecontrollerv1alpha1.Foo{} }, Templates: templates.Kind("foo")},
	{GroupVersionKind: flightsv1.GroupVersion.WithKind("FlightTicket"), New: func() v1alpha1.Object { return &flightsv1.FlightTicket{} }, Templates: templates.Kind("flightticket")},
	{GroupVersionKind: webappv1.GroupVersion.WithKind("Guestbook"), New: func() v1alpha1.Object { return &webappv1.Guestbook{} }, Templates: templates.Kind("guestbook")},
	{GroupVersionKind: stacksv1alpha1.GroupVersion.WithKind("AppStack"), New: func() v1alpha1.Object { return &stacksv1alpha1.AppStack{} }, Templates: templates.Kind("appstack")},
}

// schemes add the kinds' Go types to a scheme, one per API group.
var schemes = []func(*runtime.Scheme) error{
	cachev1alpha1.AddToScheme,
	operatorv1.AddToScheme,
	samplecontrollerv1alpha1.AddToScheme,
	flightsv1.AddToScheme,
	webappv1.AddToScheme,
	stacksv1alpha1.AddToScheme,
}

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

// decorators lists the shipped decorators, by folder: kinds whose parent is
// an existing type (templates/<name>/_decorator.yaml), with no Go type.
var decorators = []string{"replicaset-podcount", "namespace-defaults"}

// LoadDecorators parses every shipped decorator's templates; an error here
// fails start-up.
func LoadDecorators() ([]*render.Decorator, error) {
	var loaded []*render.Decorator
	for _, name := range decorators {
		d, err := render.LoadDecorator(name, templates.Kind(name))
		if err != nil {
			return nil, err
		}
		loaded = append(loaded, d)
	}
	return loaded, nil
}

// shortNames are the kinds' short names, as their CRDs declare them.
var shortNames = map[string]string{"MyWeb": "web", "FlightTicket": "ft"}

// ShortName returns a kind's short name, or "".
func ShortName(kind string) string { return shortNames[kind] }
