package cli

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stencil-operator/stencil/internal/dev/chartimport"
	"github.com/stencil-operator/stencil/render"
)

func newImportCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "import",
		Short: "Make a kind of something else (import chart)",
	}
	var o chartimport.Options
	var verify bool
	var helm string
	chartCmd := &cobra.Command{
		Use:   "chart PATH",
		Short: "Make a kind of a Helm chart: its templates, values, subcharts and values files as test cases",
		Long: `import chart adds a kind made from the Helm chart at PATH (a folder or a .tgz)
to the project in the current folder: api/<group>/<version>/ with a Go type
whose spec is the chart's values, templates/<kind>/ with the chart's
templates and helpers (read with Helm's .Values, .Release, .Chart,
.Capabilities, .Template and .Files), a test case per values file
(values.yaml and ci/*values.yaml) with its render as the expected output,
samples, and the lines that register it. What cannot be carried over as it
is, is said file by file. Then run make generate manifests: the kind's CRD
gets the schema of the chart's values, with its values as defaults.

With --verify, each values file's render is compared with helm template's,
object by object (docs/from-helm.md).`,
		Example: `  stencil import chart ./charts/shop --group shops.example.com --verify`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			if verify {
				path, err := exec.LookPath(helm)
				if err != nil {
					return fmt.Errorf("--verify runs helm template, and there is no helm at %q (make tools builds the pinned one into bin/helm; or give --helm): %w", helm, err)
				}
				o.Check = func(c *chartimport.Chart, k *render.Kind) error { return verifyChart(out, path, args[0], c, k) }
			}
			lower, notes, up, err := chartimport.Import(".", args[0], &o)
			printNotes(out, notes)
			if err != nil {
				if verify {
					return fmt.Errorf("%w (nothing was written)", err)
				}
				return err
			}
			if up != nil {
				printUpgrade(out, o.Kind, lower, up)
				return nil
			}
			_, _ = fmt.Fprintf(out, "Added kind %s (%s) from the chart %s in templates/%s/. Next: make generate manifests.\n", o.Kind, o.Group, args[0], lower)
			return nil
		},
	}
	chartCmd.Flags().StringVar(&o.Group, "group", "", "API group, a DNS name such as shops.example.com (required).")
	chartCmd.Flags().StringVar(&o.Version, "version", "v1alpha1", "API version.")
	chartCmd.Flags().StringVar(&o.Kind, "kind", "", "Kind, in CamelCase (default: the chart's name in CamelCase).")
	chartCmd.Flags().StringVar(&o.Tpl, "tpl", "", "The kind's tpl policy (tpl in _kind.yaml): own (the default), tpl runs the chart's own values only; any, the resources' values too, as Helm does, for a kind whose resources are written by people who may run templates as the operator (docs/tenancy.md).")
	chartCmd.Flags().BoolVar(&verify, "verify", false, "Compare the kind's render of each values file with helm template's.")
	chartCmd.Flags().StringVar(&helm, "helm", defaultHelm(), "The helm binary --verify runs (default: the pinned bin/helm that make tools builds, else helm on the PATH).")
	_ = chartCmd.MarkFlagRequired("group")
	cmd.AddCommand(chartCmd)
	return cmd
}

// printUpgrade says what an import over the kind's earlier one changed,
// and how to see what that changes in the clusters before it rolls out.
func printUpgrade(out io.Writer, kind, lower string, u *chartimport.Upgrade) {
	p := func(format string, args ...any) { _, _ = fmt.Fprintf(out, format, args...) }
	p("Upgraded kind %s in templates/%s/ from chart version %s to %s.\n", kind, lower, u.From, u.To)
	for _, list := range []struct {
		what  string
		paths []string
	}{{"Added", u.Added}, {"Changed", u.Changed}, {"Removed", u.Removed}, {"Kept (the project's own)", u.Own}} {
		if len(list.paths) > 0 {
			p("%s (%d):\n", list.what, len(list.paths))
			for _, path := range list.paths {
				p("  %s\n", path)
			}
		}
	}
	if len(u.Declared) > 0 {
		p("Kept in _kind.yaml (the project's own declarations): %s\n", strings.Join(u.Declared, ", "))
	}
	if len(u.Values) > 0 {
		p("Values (%d):\n", len(u.Values))
		for _, v := range u.Values {
			p("  %s\n", v)
		}
	}
	if u.Schema(lower) {
		p("The kind's CRD changes (its values' defaults or schema).\n")
	}
	p("Next: make generate manifests; stencil lint (what the new version breaks: test cases, the released API); " +
		"stencil diff --all --templates templates (what it changes in every resource of the cluster); then deploy: " +
		"the operator rolls the change out --rollout-batch resources at a time. Edits you made to the chart's own templates were replaced: git diff shows them.\n")
}

func printNotes(out io.Writer, notes []chartimport.Note) {
	if len(notes) == 0 {
		return
	}
	_, _ = fmt.Fprintf(out, "What changed in the conversion (%d):\n", len(notes))
	for _, n := range notes {
		_, _ = fmt.Fprintf(out, "  %s\n", n)
	}
}

// verifyChart compares the kind k made of the chart c (at chartPath) with
// helm template's render, before the import writes anything.
func verifyChart(out io.Writer, helm, chartPath string, c *chartimport.Chart, k *render.Kind) error {
	results, err := chartimport.Verify(helm, chartPath, c, k, "release", "default")
	if err != nil {
		return err
	}
	failed := 0
	for _, r := range results {
		switch {
		case r.Err != nil:
			_, _ = fmt.Fprintf(out, "%s: %v\n", r.ValuesFile, r.Err)
		case len(r.Differences) > 0:
			_, _ = fmt.Fprintf(out, "%s: %d of %d objects differ:\n", r.ValuesFile, len(r.Differences), r.Objects)
			for _, d := range r.Differences {
				_, _ = fmt.Fprintln(out, d)
			}
		default:
			_, _ = fmt.Fprintf(out, "%s: %d objects, as helm template renders them", r.ValuesFile, r.Objects)
			if r.Generated > 0 {
				// Helm's differ at every render too.
				_, _ = fmt.Fprintf(out, " (%d generated fields compared for being there)", r.Generated)
			}
			_, _ = fmt.Fprintln(out)
			continue
		}
		failed++
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d values files do not render as helm template does", failed, len(results))
	}
	_, _ = fmt.Fprintf(out, "Every object of %d values files is as helm template renders it.\n", len(results))
	return nil
}

// defaultHelm is the project's pinned helm (make tools), else the PATH's.
func defaultHelm() string {
	if _, err := os.Stat(filepath.Join("bin", "helm")); err == nil {
		return filepath.Join("bin", "helm")
	}
	return "helm"
}
