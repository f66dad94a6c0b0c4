package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/internal/kinds"
	"github.com/stencil-operator/stencil/render"
)

func newDriftCommand() *cobra.Command {
	var namespace string
	cmd := &cobra.Command{
		Use:   "drift KIND/NAME",
		Short: "Print the drift recorded in a custom resource's status",
		Long: `drift reads a custom resource and prints, per object and field, what another
field manager changed: the desired and live values, who changed it and when,
and the diff. Under the Correct policy it shows what stencil last reverted.

KIND is the kind, its plural or short name (memcached, mywebs, web, ft, ...).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDrift(cmd.Context(), args[0], namespace, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "Namespace of the resource.")
	return cmd
}

func runDrift(ctx context.Context, ref, namespace string, out io.Writer) error {
	kindName, name, ok := strings.Cut(ref, "/")
	if !ok || name == "" {
		return fmt.Errorf("%q: want KIND/NAME, as in myweb/myweb", ref)
	}
	kind, err := findKind(kindName)
	if err != nil {
		return err
	}
	c, err := newClient()
	if err != nil {
		return err
	}
	cr := kind.New()
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cr); err != nil {
		return fmt.Errorf("reading %s %s/%s: %w", kind.GroupVersionKind().Kind, namespace, name, err)
	}
	_, err = io.WriteString(out, formatDrift(kind.GroupVersionKind().Kind, cr))
	return err
}

// formatDrift is the drift in cr's status, for people.
func formatDrift(kind string, cr v1alpha1.Object) string {
	out := &strings.Builder{}
	status := cr.StencilStatus()
	fmt.Fprintf(out, "%s %s/%s, drift policy %s\n", kind, cr.GetNamespace(), cr.GetName(), cr.StencilDriftPolicy())
	if c := meta.FindStatusCondition(status.Conditions, v1alpha1.ConditionDrifted); c != nil {
		fmt.Fprintf(out, "Drifted=%s (%s): %s\n", c.Status, c.Reason, c.Message)
	}
	if len(status.Drift) == 0 {
		out.WriteString("No drift recorded.\n")
		return out.String()
	}
	for _, o := range status.Drift {
		verb := "differs"
		if o.Reverted {
			verb = "was reverted"
		}
		fmt.Fprintf(out, "\n%s %s (%s) %s:\n", o.Kind, o.Name, o.APIVersion, verb)
		for _, f := range o.Fields {
			by := ""
			if f.Manager != "" {
				by = " by " + f.Manager
			}
			if f.Time != nil {
				by += " at " + f.Time.UTC().Format("2006-01-02 15:04:05Z")
			}
			fmt.Fprintf(out, "  %s: desired %s, live %s%s\n", f.Path, orNone(f.Desired), orNone(f.Live), by)
		}
		if o.Diff != "" {
			fmt.Fprintf(out, "%s\n", indent(o.Diff, "  "))
		}
	}
	return out.String()
}

func orNone(v string) string {
	if v == "" {
		return "(none)"
	}
	return v
}

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}

// findKind resolves a kind by its name, plural or short name, any case.
func findKind(name string) (*render.Kind, error) {
	loaded, err := kinds.Load()
	if err != nil {
		return nil, err
	}
	name = strings.ToLower(name)
	var known []string
	for _, k := range loaded {
		kind := strings.ToLower(k.GroupVersionKind().Kind)
		if name == kind || name == kind+"s" || kinds.ShortName(k.GroupVersionKind().Kind) == name && name != "" {
			return k, nil
		}
		known = append(known, kind)
	}
	return nil, fmt.Errorf("unknown kind %q; stencil knows %s", name, strings.Join(known, ", "))
}
