// Package api holds stencil's API types: the status shape that every kind
// shares (conditions, inventory, drift) and, under api/<group>/<version>/,
// one package per kind group. It imports only the standard library and
// apimachinery; CRDs are generated from its kubebuilder markers.
package api
