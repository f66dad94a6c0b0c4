// Package layering holds the test that keeps stencil's imports one-way:
//
//	api ← render ← reconciler, reconciler/decorator ← internal/cli ← main.go
//	api ← reconciler/engine ← reconciler, reconciler/decorator
//	api ← reconciler/rollout, reconciler/shard ← reconciler
//
// Each package of the table in layering_test.go may import only the
// packages of this module that its row names (its own sub-packages
// aside); a new import against the layering fails `make test` and
// `make test-fast`, with the import and the rule it breaks. The tests of
// the engine, rollouts and shards may not link either controller.
package layering
