// Package rollout paces the changes that the templates alone bring to
// converged resources of one kind: a Gate hands out turns, a batch at a
// time, and halts when a resource that took its turn fails to become Ready
// within the deadline. A change of a resource's own spec never waits.
//
// It knows nothing of apply or status: the kind reconciler asks the gate
// for a turn (admit) before it applies a template change, and tells it how
// the resource settled (settle). The gate's state is rebuilt from the
// resources' status.rollout when a process starts (seed), so a new leader
// goes on where the old one stopped.
//
// It is not public API: it may change in any release. Depend on pkg/stencil
// and pkg/stenciltest (docs/stability.md).
package rollout
