package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// stampedVersion is the release a build from a checkout was made at, set
// by the linker: make build and the image stamp it when a checkout without
// changes is at a release tag (-ldflags "-X …/internal/cli.stampedVersion=vX.Y.Z"). A
// go install of a tagged version needs no stamp: Go records the module's
// version.
var stampedVersion string

// build is what this binary says of itself: stencil's version (buildVersion;
// "(devel)" for a development build), the commit it was built from, as Go
// stamps it ("+dirty" when the checkout had changes), and Go's version.
type build struct {
	Version, Revision, Go string
}

// thisBuild reads build from the binary's build information.
func thisBuild() build {
	b := build{Version: buildVersion(), Go: runtime.Version()}
	if b.Version == "" {
		b.Version = "(devel)"
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && b.Revision != "" {
		b.Revision += "+dirty"
	}
	return b
}

func (b build) String() string {
	rev := b.Revision
	if rev == "" {
		rev = "unknown"
	}
	return fmt.Sprintf("stencil %s (commit %s, %s)", b.Version, rev, b.Go)
}

// buildInfo is stencil_build_info: 1, labelled with the build, as
// Kubernetes' own components export theirs.
var buildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "stencil_build_info",
	Help: "1, labelled with the version, commit and Go version stencil was built from.",
}, []string{"version", "revision", "goversion"})

func init() {
	metrics.Registry.MustRegister(buildInfo)
	b := thisBuild()
	buildInfo.WithLabelValues(b.Version, b.Revision, b.Go).Set(1)
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version stencil was built from",
		Long: `version prints the version of stencil this binary was built from: a
release's tag when built with go install github.com/stencil-operator/stencil@<tag>
(or, in a project's binary, the stencil its go.mod requires), "(devel)" for a
build from a checkout; the commit, when Go stamped it ("+dirty" when the
checkout had changes); and Go's version. The metric stencil_build_info
carries the same labels.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), thisBuild())
			return err
		},
	}
}
