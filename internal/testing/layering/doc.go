// Package layering holds the test that keeps stencil's imports one-way.
// The module stands in floors; a package imports only what stands below
// it, or the packages under it (render/kindtest imports render), or what
// its row in the table names on its own floor (chartimport imports
// scaffold):
//
//	top          main.go, hack/, e2e/, docs/ (nothing imports them)
//	tests' kit   internal/testing: testkind, samples, testutil/testop
//	kinds        templates (stencil's own kinds, written against pkg/stencil)
//	public       pkg/stencil, pkg/stenciltest
//	command      internal/cli
//	tools        internal/dev: scaffold, chartimport, devrun
//	operator     internal/operator: kinds, conversion
//	controllers  reconciler, reconciler/decorator
//	parts        reconciler/engine, reconciler/rollout, reconciler/shard
//	render       render
//	ground       api, reconciler/syncmap, reconciler/fence, config,
//	             internal/operator/metricsauth, internal/dev/localcluster,
//	             internal/dev/chart, internal/testing/testutil (and the
//	             tests of internal/testing/processtest and layering, which
//	             hold no code)
//
// internal/ is grouped by role, whatever a package's floor: internal/cli
// is the command line, internal/operator what an operator is made of
// beside its controllers, internal/dev a developer's tools, and
// internal/testing the tests' own infrastructure.
//
// Every package of the module has a row in the table of layering_test.go,
// which names what its code (not its tests) may import; a package without
// a row, or an import against its row, fails `make test` and
// `make test-fast`, with the import and the rule it breaks. The tests of
// the engine, rollouts and shards may not link either controller.
package layering
