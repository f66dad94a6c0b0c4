package cli_test

import (
	"github.com/stencil-operator/stencil/internal/cli"
	"github.com/stencil-operator/stencil/internal/testing/samples"
)

func init() { cli.UseSamples(samples.Set()) }
