// Package reconciler is the kind reconciler: the one generic reconciler
// that serves every kind, one controller per kind, named after it. It
// composes the packages beside it, none of which imports it:
//
//	reconciler/engine     server-side apply, ownership, drift, prune (the SSA engine)
//	reconciler/rollout    paced rollouts of template changes
//	reconciler/shard      shards, claim names, takeover of a stopped shard's claims
//	reconciler/decorator  the decorator controller (set up beside this one; it never imports it)
//
// One reconcile reads top to bottom in reconcile.go, every phase in it (the
// work a phase calls is in the file named beside it): Reconcile finds the
// resource and its claim, then a live resource goes through the phases in
// order over one state; each phase records what it saw and returns its
// outcome: go on, or stop, when to look again, and why it failed (the
// runner, run, records that failure: no phase writes one elsewhere);
// finish writes the status, and conclude turns the outcome into
// controller-runtime's result (the one place that handles a fenced write):
//
//	claim    (claim.go, shard)       is the resource this shard's? take its claim
//	types    (served.go)             every type the kind needs is served
//	render   (render.go, graph.go)   the spec into desired objects; a graph kind only the nodes whose turn came
//	act as   (tenant.go)             who writes its objects, and may it
//	gate     (gate.go, hold.go)      a change of the templates alone waits for its turn
//	finalizer (finalizer.go)         before any object it must clean up
//	apply    (apply.go, engine)      server-side apply of what needs it; drift, conflicts
//	blocked  (apply.go)              what the apply had to leave: nothing is pruned then
//	prune    (claim.go, engine)      the objects the render no longer holds
//	observe  (observe.go)            the kind's status template
//	health   (health.go)             kstatus of the applied objects
//	finish   (status.go)             conditions, inventory, drift, health; one merge patch
//
// A resource being deleted goes through the deletion phases
// (finalizer.go), by the same runner; finishDeletion writes its status
// when there is something to tell:
//
//	writable         (finalizer.go)                 a fenced leader writes nothing
//	holds finalizer  (finalizer.go)                 nothing to clean up without stencil's
//	clean up         (orphan.go, graph.go, engine)  delete, or release, what no ownerReference reaches
//	release          (finalizer.go)                 remove the finalizer
//	report           (finalizer.go)                 done, after a cleanup that failed before
//
// What the reconciler remembers of a resource between reconciles is one
// struct (memory.go); events.go maps watch events to resources; setup.go
// builds the controllers; result.go is what a reconcile saw.
//
// Words, each with one meaning:
//
//	baseline   the fields stencil's field manager owned right after its last
//	           apply of an object (engine): drift is a field it has lost since
//	claim      a shard's label on a resource: that shard alone writes for it
//	           (shard); not the engine's first applies (engine.FirstApplies),
//	           which let one resource at a time create an object name
//	hold       while a resource waits for its turn in a paced rollout, its
//	           objects are held as the previous templates made them (hold.go)
//	keep       what hold does to one object: drift in it is reported, or
//	           corrected to the previous templates' values (engine.Keep)
//	fight      another writer keeps taking back a field stencil corrects;
//	           stencil paces its corrections (engine/fights.go)
//	hand-over  a field the template gives to another manager once set (an
//	           autoscaler's replicas): stencil stops owning it
//	own write  a watch event of stencil's own apply or status write, which
//	           needs no reconcile (engine/ownwrites.go)
//	stage      a graph kind's deletion order: its objects are deleted stage
//	           by stage, last stage first (graph.go)
//	conflict   a rendered object exists and is not this resource's: it is
//	           left untouched (engine/ownership.go)
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
// checked by internal/testing/layering's test.
//
// It is not public API: it may change in any release. Depend on pkg/stencil
// and pkg/stenciltest (docs/stability.md).
package reconciler
