// Package e2e holds the end-to-end suite (build tag e2e): the real stencil
// binary, running out of cluster against a local control plane, driven with
// the real kubectl. Run it with `make test-e2e` (or as part of `make test`).
package e2e
