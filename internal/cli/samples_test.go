package cli

import (
	"github.com/stencil-operator/stencil/internal/operator/kinds"
	"github.com/stencil-operator/stencil/render"
)

// samples is stencil's sample set, the kinds these tests run. Package
// templates registers them as a project does, through pkg/stencil, which
// imports this package: an external test file (samples_ext_test.go) hands
// them in before any test runs.
var samples kinds.Set

// UseSamples sets the kinds these tests run (samples_ext_test.go).
func UseSamples(s kinds.Set) { samples = s }

// sampleKinds parses every sample kind's templates.
func sampleKinds() ([]*render.Kind, error) { return samples.Load() }
