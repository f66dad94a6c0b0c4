// Package stencil is the public API of stencil, a Kubernetes operator whose
// resource logic lives in templates. A project of your own (made by
// `stencil init`) depends on this module and registers its kinds here; its
// main.go is one call:
//
//	func main() { stencil.Main(templates.Project) }
//
// The binary that call builds is a whole operator with stencil's command
// line: run without a subcommand it runs the operator (every flag of
// `stencil --help`: metrics, leader election, shards, render limits, the
// start-up self-check of the templates against their own test cases); its
// subcommands render, diff, drift, lint and test templates, write the RBAC,
// admission policy and Helm chart its kinds need (`manifests`), and run it
// on a local control plane while you edit (`dev`).
//
// A Kind pairs a custom resource's Go type (api/<group>/<version>, with
// kubebuilder markers for its CRD) and the AddToScheme of its package with
// its folder of templates, usually embedded with go:embed. A Decorator is
// a folder of templates whose parent is an existing type. Project lists
// both; its Setup adds Go controllers, webhooks and runnables of your own
// to the manager that runs the templates.
//
// stencil's own binary is built the same way, from its sample kinds
// (package templates of github.com/stencil-operator/stencil).
//
// Package stenciltest, beside this one, holds what a project's tests need:
// a local control plane and a smoke test that brings every sample Ready.
package stencil
