// Package decorator is the decorator controller: one controller per
// decorator that an install enables, which writes labels and annotations
// onto parent objects it does not own (as its own field manager, Manager)
// and may create child objects, owned by the parent. Its writes follow
// rules of their own (it holds keys on objects it does not own, and
// children owned by a parent it does not own), so it does not go through
// the engine's Apply and Prune; from package engine it takes the cache's
// types (CachedTypes), object ids and the object counters. It shares no
// state with the kind reconciler.
//
// Invariants:
//   - A decorator that is off watches and writes nothing. One that runs
//     writes only in its scope (scope.go), and outside it only to
//     give up what it set there.
//   - It never takes a label or annotation another manager holds, and
//     gives up exactly the keys it holds (read from managedFields), so a
//     disabled decorator leaves nothing behind.
//   - Its children are pruned only when they carry its owner reference to
//     the parent and its label.
//
// It is not public API: it may change in any release. Depend on pkg/stencil
// and pkg/stenciltest (docs/stability.md).
package decorator
