// Package reconciler is the kind reconciler: the one generic reconciler
// that serves every kind, one controller per kind, named after it. It
// composes the packages beside it, none of which imports it:
//
//	reconciler/engine     server-side apply, ownership, drift, prune (the SSA engine)
//	reconciler/rollout    paced rollouts of template changes
//	reconciler/shard      shards, claim names, takeover of a stopped shard's claims
//	reconciler/decorator  the decorator controller (set up beside this one; it never imports it)
//
// A custom resource flows through one reconcile like this (Reconcile in
// reconciler.go, run for the phases):
//
//	claim (claim.go, shard)       is the resource this shard's? take its claim
//	render (graph.go, render)     the spec into desired objects; a graph kind only the nodes whose turn came
//	act as (tenant.go)            the resource's ServiceAccount writes, when the install says so
//	gate (rollout)                a change of the templates alone waits for its turn
//	apply (engine)                server-side apply of what needs it; drift, conflicts
//	prune (engine)                the objects the render no longer holds
//	status (status.go, health.go) conditions, inventory, drift, health; one merge patch
//
// Invariants:
//   - It never touches text/template; package render turns a custom
//     resource into objects.
//   - A reconcile renders with one version of its kind's templates from
//     start to end. LiveKinds (reload.go, --reload-templates) replaces
//     them between reconciles, only when they need no watch the running
//     controller lacks, and queues the kind's resources again.
//   - Objects are server-side-applied with field manager "stencil"
//     (engine.FieldManager); status is merge-patched with "stencil-status"
//     (StatusFieldManager), only what changed.
//   - An object is applied only when it is missing, its desired hash
//     changed, or our manager lost a field it owned right after our last
//     apply (drift). A converged resource costs no request.
//   - Nothing is pruned after a failed render, a failed apply, or an empty
//     render of a resource that had objects. A prune needs the owner label,
//     a second proof of ownership and a UID precondition (engine).
//   - Owned types are watched metadata-only, and the cache holds only
//     objects labelled app.kubernetes.io/managed-by=stencil.
//   - A graph kind (graph.go) renders only the nodes whose turn has come,
//     from a snapshot: its objects from the cache, its inputs read from
//     the API server. While any node waits nothing is pruned; its
//     resources are deleted stage by stage, last stage first, through the
//     finalizer.
//
// The layering (engine, rollout and shard import none of the others, only
// api; decorator imports api, render and engine, never this package) is
// checked by internal/layering's test.
package reconciler
