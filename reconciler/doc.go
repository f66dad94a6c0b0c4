// Package reconciler is the one generic reconciler that serves every kind,
// one controller per kind, named after it. Each reconcile runs, in order:
//
//	render → apply → prune → status
//
// Invariants:
//   - It never touches text/template; package render turns a custom
//     resource into objects.
//   - Objects are server-side-applied with field manager "stencil"; status
//     is merge-patched with "stencil-status", only what changed.
//   - An object is applied only when it is missing, its desired hash
//     changed, or our manager lost a field it owned right after our last
//     apply (drift). A converged resource costs no request.
//   - Nothing is pruned after a failed render, a failed apply, or an empty
//     render of a resource that had objects. A prune needs the owner label,
//     a second proof of ownership and a UID precondition.
//   - Owned types are watched metadata-only, and the cache holds only
//     objects labelled app.kubernetes.io/managed-by=stencil.
//   - A graph kind (graph.go) renders only the nodes whose turn has come,
//     from a snapshot: its objects from the cache, its inputs read from
//     the API server. The objects of the nodes that wait are kept as they
//     are (prune skips them); its resources are deleted stage by stage,
//     last stage first, through the finalizer.
//   - Decorators (decorator*.go) run only when an install enables them,
//     each in its scope (decorator_scope.go): one that is off watches and
//     writes nothing; one that runs writes outside its scope only to give
//     up what it set there.
package reconciler
