// Package render turns a custom resource into the objects its kind's
// templates describe. It is pure: no Kubernetes client, no clock; templates
// are data, parsed once at start-up. A graph kind's render (graph.go,
// plan.go) is a function of the resource and a snapshot of the live objects
// it reads, which the caller gives (the reconciler's cache, a file offline);
// its one source of randomness, generate, is given too, and fixed unless
// the caller gives another.
//
// A kind is loaded once, then renders each resource (read top to bottom):
//
//	load      (kind.go)             a folder and its Definition into a Kind: templates parsed,
//	                                _kind.yaml read, the files' digest (Templates)
//	          (helm.go)             a chart kind: its chart, values and helpers
//	execute   (render.go)           executeFile: each template with the resource as dot,
//	                                or a chart kind's with Helm's objects (helm.go)
//	          (funcs.go, guard.go, limits.go, generated.go, lookup.go, capabilities.go)
//	                                the functions a template calls; every printed value
//	                                stays data and within the render's Limits
//	decode    (decode.go)           the output's YAML documents into objects (Flatten lists)
//	finish    (render.go, stamp.go, each object checked against the kind's rules
//	          written.go)           (what its file may write), stamped with its owner's
//	                                labels and references, and validated (a Validator:
//	                                the API server's schema)
//
// A Kind is a small core (its Definition, declaration, parsed templates and
// Limits) with its concerns beside it, each its own type: the chart (helm.go),
// what its templates write themselves (written.go), what tpl may run
// (guard.go: tplPolicy), what it is told of the cluster (capabilities.go:
// cluster, set by the With… builders), its Graph and its Conversion.
//
// A graph kind renders node by node instead (plan.go, graph.go,
// graph_scope.go, graph_readiness.go, nodes.go): each node whose turn came,
// with what the nodes before it made, read from the snapshot; the others
// wait (Plan.Waiting).
//
// Beside the render: status.go runs the kind's status template over the
// applied objects, convert.go its conversion templates between versions,
// decorator.go a decorator's templates, and locate.go finds the line of a
// template an error comes from.
//
// It is not public API: it may change in any release. Depend on pkg/stencil
// and pkg/stenciltest (docs/stability.md).
package render
