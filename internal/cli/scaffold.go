package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stencil-operator/stencil/internal/dev/scaffold"
)

// stencilModule is the module a project made by init requires.
const stencilModule = "github.com/stencil-operator/stencil"

func newInitCommand() *cobra.Command {
	var o scaffold.Options
	var checkout string
	var tidy, git bool
	cmd := &cobra.Command{
		Use:   "init [DIR]",
		Short: "Write a new operator project of your own into an empty folder (default: the current one)",
		Long: `init writes a new Go project whose operator is built with stencil as a
dependency: go.mod (requiring this stencil's version), main.go, templates/,
config/ (RBAC generated from its kinds only, the manager, admission
policies, the Helm chart), a Makefile with the targets stencil's own has
(run, test, test-fast, lint, manifests, generate, build, docker-build,
deploy, install, kind, help), a Dockerfile, .ci/run, a README and a smoke
test. It has no kind yet: ` + "`make kind GROUP=… KIND=…`" + ` adds one.
docs/getting-started.md walks through it.`,
		Example: `  mkdir widgets && cd widgets
  stencil init --module example.com/widgets
  make kind GROUP=widgets.example.com KIND=Widget
  make run`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			return runInit(cmd, dir, o, checkout, tidy, git)
		},
	}
	cmd.Flags().StringVar(&o.Module, "module", "", "The project's Go module path, e.g. example.com/widgets (required).")
	cmd.Flags().StringVar(&o.Name, "name", "", "The operator's name: its binary, namespace (<name>-system) and cluster-wide objects (default: the module path's last element).")
	cmd.Flags().StringVar(&o.Domain, "domain", "", "The suffix of the kinds' API groups that make kind suggests (default: the module path's first element).")
	cmd.Flags().StringVar(&checkout, "stencil-checkout", "", "A stencil checkout the project's go.mod points at with a replace directive (developing stencil itself; required with a development build of stencil).")
	cmd.Flags().BoolVar(&tidy, "tidy", true, "Run go mod tidy in the new project (it fetches stencil's dependencies).")
	cmd.Flags().BoolVar(&git, "git", true, "Make the new project a git repository with a first commit (unless it is inside one already).")
	_ = cmd.MarkFlagRequired("module")
	return cmd
}

func runInit(cmd *cobra.Command, dir string, o scaffold.Options, checkout string, tidy, git bool) error {
	o.StencilVersion = buildVersion()
	if checkout != "" {
		abs, err := filepath.Abs(checkout)
		if err != nil {
			return err
		}
		if _, err := os.Stat(filepath.Join(abs, "go.mod")); err != nil {
			return fmt.Errorf("--stencil-checkout %s: no go.mod there: %w", checkout, err)
		}
		o.Replace = abs
		if o.StencilVersion == "" {
			o.StencilVersion = "v0.0.0-00010101000000-000000000000" // any version: the replace decides
		}
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := scaffold.Init(dir, o); err != nil {
		return err
	}
	if tidy {
		tidyCmd := exec.CommandContext(cmd.Context(), "go", "mod", "tidy")
		tidyCmd.Dir, tidyCmd.Stdout, tidyCmd.Stderr = dir, cmd.ErrOrStderr(), cmd.ErrOrStderr()
		if err := tidyCmd.Run(); err != nil {
			return fmt.Errorf("go mod tidy in %s: %w", dir, err)
		}
	}
	if git {
		gitInit(cmd, dir)
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "Wrote a new operator project in %s. Next: make kind GROUP=<group> KIND=<Kind>, then make run (docs/getting-started.md).\n", dir)
	return err
}

// gitInit makes dir a git repository with the new project as its first
// commit, as a project's make release-crds (which records the commit) and
// its users expect; it leaves a folder inside a repository already alone.
// What fails (no git, no identity for the commit) is said, not an error:
// the project is written.
func gitInit(cmd *cobra.Command, dir string) {
	run := func(args ...string) error {
		c := exec.CommandContext(cmd.Context(), "git", args...)
		c.Dir = dir
		if out, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	if _, err := exec.LookPath("git"); err != nil {
		_, _ = fmt.Fprintln(cmd.ErrOrStderr(), "No git found: the project is not a git repository (make release-crds needs one).")
		return
	}
	if run("rev-parse", "--is-inside-work-tree") == nil {
		return // inside a repository already: its owner commits
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-q", "-m", "Scaffold with stencil init"}} {
		if err := run(args...); err != nil {
			_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "The project is written, but not committed: %v\n", err)
			return
		}
	}
}

// buildVersion is the version of stencil this binary was built from, as
// a project's go.mod requires it: "" for a development build (a checkout
// with changes, or go run), which has no such version.
func buildVersion() string {
	if stampedVersion != "" {
		return stampedVersion
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	v := info.Main.Version
	if info.Main.Path != stencilModule {
		// A project's binary: the stencil it depends on.
		for _, dep := range info.Deps {
			if dep.Path == stencilModule {
				if dep.Replace != nil {
					return ""
				}
				v = dep.Version
			}
		}
	}
	if v == "" || v == "(devel)" || strings.Contains(v, "+dirty") {
		return ""
	}
	return v
}

func newCreateCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Add to the project in the current folder (create kind)",
	}
	var group, version, kind string
	kindCmd := &cobra.Command{
		Use:   "kind",
		Short: "Add a kind: API types, a template folder with a first test, samples and its registration",
		Long: `create kind adds a kind to the project in the current folder (one made by
stencil init, or stencil's own repository): api/<group>/<version>/ with the
kind's Go types, templates/<kind>/ with a _kind.yaml, a ConfigMap template
and a test case, config/samples/<kind>.yaml and a full sample, and the lines
that register it (templates/kinds.go, templates/doc.go, config/crd).
` + "`make kind`" + ` runs it, then make generate manifests and writes the test's
expected output.`,
		Example: `  stencil create kind --group gadgets.example.com --version v1alpha1 --kind Gadget`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lower, err := scaffold.AddKind(".", group, version, kind)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Added kind %s (%s/%s). Next: make generate manifests, then edit its Go types under api/ and its templates in templates/%s/.\n", kind, group, version, lower)
			return err
		},
	}
	kindCmd.Flags().StringVar(&group, "group", "", "API group, a DNS name such as gadgets.example.com (required).")
	kindCmd.Flags().StringVar(&version, "version", "v1alpha1", "API version.")
	kindCmd.Flags().StringVar(&kind, "kind", "", "Kind, in CamelCase, such as Gadget (required).")
	_ = kindCmd.MarkFlagRequired("group")
	_ = kindCmd.MarkFlagRequired("kind")
	cmd.AddCommand(kindCmd, newCreateVersionCommand())
	return cmd
}

func newCreateVersionCommand() *cobra.Command {
	var version, kind string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Give a kind a new API version, with conversion templates",
		Long: `create version gives a registered kind a new API version, the steps of
docs/evolve-api.md: api/<group>/<version>/ as a copy of the kind's current
package, marked as the version the API server stores; the kind registered
at the new version, its hub (templates/kinds.go); _from-<old>.yaml and
_to-<old>.yaml, conversion templates that copy the spec as it is; ownerVersion
<old> in _kind.yaml, so that the objects the kind made keep their owner
references; the samples and test inputs at the new version, and one test
case kept at the old one (tests/<old>/).
` + "`make api-version`" + ` runs it, then make generate manifests. Then change the new
version's Go types, and the conversion templates with them.`,
		Example: `  stencil create version --kind Gadget --version v1`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			old, err := scaffold.AddVersion(".", kind, version)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Kind %s has a version %s beside %s: its types in api/, its registration, conversion templates, samples and tests. Next: make generate manifests (the CRD serves both and stores %s), then change the %s Go types and templates/%s/_from-%s.yaml and _to-%s.yaml with them.\n", kind, version, old, version, version, strings.ToLower(kind), old, old)
			return err
		},
	}
	cmd.Flags().StringVar(&version, "version", "", "The new API version, such as v1 (required).")
	cmd.Flags().StringVar(&kind, "kind", "", "The registered kind, in CamelCase, such as Gadget (required).")
	_ = cmd.MarkFlagRequired("version")
	_ = cmd.MarkFlagRequired("kind")
	return cmd
}
