// Package engine is stencil's server-side apply engine: given the desired
// objects of one owner (a custom resource) and the owner's inventory, it
// applies what needs it, reports drift, and prunes what the owner no longer
// renders. It knows nothing of templates, kinds, shards or rollouts; the
// kind reconciler (package reconciler) and the decorator controller
// (package decorator) compose it.
//
// An apply reads one way, each step's code in one file, in the order
// applyObject takes the steps:
//
//	apply.go      the spine: for each desired object, the steps in order
//	              (a failed create-first apply takes them once more)
//	decide.go     the decision (check): the cache's copy, or one read when
//	              the cache cannot tell; whose the object is; the baselines
//	              (learnt with a dry run when unknown) and the fields our
//	              manager lost since (drift); what a refused write means
//	drift.go      what needs no write (settle); the drift reported, and
//	              corrected or not (fights), as kubectl diff shows it
//	body.go       the body of the apply: without the fields others hold
//	              (policy Report) or were handed over
//	write.go      the write: one apply, and the baseline it leaves
//	outcome.go    ApplyOutcome: one Change per object, which each step
//	              fills in for the object at hand (ApplyOutcome.of)
//	immutable.go  an object the API server refused: rejected, or an
//	              immutable field (recreate)
//
// applier.go holds the Applier and what it remembers between applies.
//
// What it owns:
//   - Apply (apply.go): server-side apply with field manager FieldManager,
//     and only when an object is missing, its desired hash changed, or our
//     manager lost a field it owned right after our last apply (its
//     baseline, decide.go). A converged object costs no request.
//   - Ownership (decide.go, ownership.go): an object is applied only when
//     it is the owner's (owner label plus controller ownerReference, or
//     owner annotation when cluster-scoped), or on a person's request
//     (adoption); else it is a Conflict. Claims let one owner at a time
//     create an object name.
//   - Hand-over (decide.go, body.go): fields a template hands over are applied
//     once and then left to the manager that takes them.
//   - Immutable fields (immutable.go): when an apply is refused for a field
//     that cannot change, the object is deleted and created anew, but only
//     when its template allows it (stencil.dev/force) and it holds no data
//     or the template allows losing it; else the refusal is reported.
//   - Drift (decide.go, drift.go): which fields another manager took, as
//     kubectl diff would show them; fights (fights.go) pace the
//     corrections of an object another writer keeps changing back.
//   - Identity (id.go): ObjectID names an object whatever its version;
//     ObjectKey adds the UID of its owner, for what the engine remembers.
//   - Own writes (ownwrites.go): the watch events of the engine's own
//     applies are told from others', so they wake nobody.
//   - Prune (prune.go): deletes the owner's objects that the render no
//     longer holds.
//   - Object health (objhealth.go): what kstatus says of an applied object.
//
// Invariants:
//   - It never modifies or deletes an object that is not the owner's. A
//     prune needs the owner label, a second proof of ownership, and a UID
//     precondition.
//   - It never prunes on its own initiative: the caller decides when (never
//     after a failed or empty render; see EmptyRender).
//   - Everything it remembers (baselines, health, fights) is a cache: a new
//     process relearns it, from the live objects or with one dry-run apply.
//   - Values of Secrets never reach its reports (drift masks them).
//
// It is not public API: it may change in any release. Depend on pkg/stencil
// and pkg/stenciltest (docs/stability.md).
package engine
