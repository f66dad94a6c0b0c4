// Package render turns a custom resource into the objects its kind's
// templates describe. It is pure: no Kubernetes client, no clock; templates
// are data, parsed once at start-up. A graph kind's render (graph.go,
// plan.go) is a function of the resource and a snapshot of the live objects
// it reads, which the caller gives (the reconciler's cache, a file offline);
// its one source of randomness, generate, is given too, and fixed unless
// the caller gives another.
//
// It is not public API: it may change in any release. Depend on pkg/stencil
// and pkg/stenciltest (docs/stability.md).
package render
