// Package shard splits the custom resources of every kind between
// processes. Shards says which resources are this process's (by the label
// stencil.dev/shard; the default shard takes those no known shard names)
// and how its claim label reads; Leases and LeaseWatch let a shard take
// over the claims of a shard whose leader Lease has stayed unchanged for
// long enough (takeover.go).
//
// Invariants:
//   - A resource is never nobody's: the default shard takes every resource
//     whose label names no known shard.
//   - A claim is taken over only when its holder's Lease has not changed
//     for the whole wait, as seen by this process, and the Lease is seized
//     with an update that fails if the holder renewed it meanwhile.
//
// The claim protocol itself (take, release, prune after a claim) runs in
// the kind reconciler (package reconciler, claim.go), which writes claims
// on the custom resources; writes go through the leader fence
// (reconciler/fence).
//
// It is not public API: it may change in any release. Depend on pkg/stencil
// and pkg/stenciltest (docs/stability.md).
package shard
