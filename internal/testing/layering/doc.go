// Package layering holds the test that keeps stencil's imports one-way.
// The module stands in floors; a package imports only what stands below
// it (the packages under a folder count as one):
//
//	top          main.go, hack/, e2e/, docs/ (nothing imports them)
//	kinds        templates (stencil's own kinds, written against pkg/stencil)
//	public       pkg/stencil, pkg/stenciltest
//	command      internal/cli
//	tools        internal/dev: scaffold, chartimport, devrun (localcluster, chart below)
//	operator     internal/operator: kinds, conversion, samples (metricsauth below)
//	controllers  reconciler, reconciler/decorator
//	parts        reconciler/engine, reconciler/rollout, reconciler/shard
//	render       render
//	ground       api, reconciler/syncmap, reconciler/fence, config,
//	             internal/dev/localcluster, internal/dev/chart,
//	             internal/operator/metricsauth, internal/testing
//
// internal/ is grouped by role: internal/cli is the command line,
// internal/operator what an operator is made of beside its controllers,
// internal/dev a developer's tools, internal/testing the tests' own
// infrastructure.
//
// Every package of the module has a row in the table of layering_test.go,
// which names what it may import; a package without a row, or an import
// against its row, fails `make test` and `make test-fast` with the import
// and the rule it breaks. The tests of the engine, rollouts and shards may
// not link either controller.
package layering
