package cli_test

import (
	"github.com/stencil-operator/stencil/internal/cli"
	"github.com/stencil-operator/stencil/internal/operator/samples"
)

func init() { cli.UseSamples(samples.Set()) }
