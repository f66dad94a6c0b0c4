package templates

import (
	cachev1 "github.com/stencil-operator/stencil/api/cache/v1"
	flightsv1 "github.com/stencil-operator/stencil/api/flights/v1"
	operatorv1 "github.com/stencil-operator/stencil/api/operator/v1"
	samplecontrollerv1alpha1 "github.com/stencil-operator/stencil/api/samplecontroller/v1alpha1"
	stacksv1alpha1 "github.com/stencil-operator/stencil/api/stacks/v1alpha1"
	"github.com/stencil-operator/stencil/api/v1alpha1"
	webappv1 "github.com/stencil-operator/stencil/api/webapp/v1"
	// +stencil:scaffold:imports (stencil create kind adds a kind's package above)
	"github.com/stencil-operator/stencil/pkg/stencil"
)

// Kinds registers the sample kinds, one entry each: API group and kind, Go
// type and its scheme, template folder. A project made by `stencil init`
// has the same list in its own templates/kinds.go.
var Kinds = []stencil.Kind{
	{GroupVersionKind: cachev1.GroupVersion.WithKind("Memcached"), New: func() v1alpha1.Object { return &cachev1.Memcached{} }, AddToScheme: cachev1.AddToScheme, Templates: Kind("memcached")},
	{GroupVersionKind: operatorv1.GroupVersion.WithKind("MyWeb"), New: func() v1alpha1.Object { return &operatorv1.MyWeb{} }, AddToScheme: operatorv1.AddToScheme, Templates: Kind("myweb"), ShortNames: []string{"web"}},
	{GroupVersionKind: samplecontrollerv1alpha1.GroupVersion.WithKind("Foo"), New: func() v1alpha1.Object { return &samplecontrollerv1alpha1.Foo{} }, AddToScheme: samplecontrollerv1alpha1.AddToScheme, Templates: Kind("foo")},
	{GroupVersionKind: flightsv1.GroupVersion.WithKind("FlightTicket"), New: func() v1alpha1.Object { return &flightsv1.FlightTicket{} }, AddToScheme: flightsv1.AddToScheme, Templates: Kind("flightticket"), ShortNames: []string{"ft"}},
	{GroupVersionKind: webappv1.GroupVersion.WithKind("Guestbook"), New: func() v1alpha1.Object { return &webappv1.Guestbook{} }, AddToScheme: webappv1.AddToScheme, Templates: Kind("guestbook")},
	{GroupVersionKind: stacksv1alpha1.GroupVersion.WithKind("AppStack"), New: func() v1alpha1.Object { return &stacksv1alpha1.AppStack{} }, AddToScheme: stacksv1alpha1.AddToScheme, Templates: Kind("appstack")},
	// +stencil:scaffold:kinds
}

// Decorators registers the sample decorators: kinds whose parent is an
// existing type (templates/<name>/_decorator.yaml), with no Go type.
var Decorators = []stencil.Decorator{
	{Name: "replicaset-podcount", Templates: Kind("replicaset-podcount")},
	{Name: "namespace-defaults", Templates: Kind("namespace-defaults")},
}
