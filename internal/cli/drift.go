package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/reconciler/decorator"
	"github.com/stencil-operator/stencil/render"
)

func newDriftCommand(project *operator) *cobra.Command {
	var namespace string
	cmd := &cobra.Command{
		Use:   "drift KIND/NAME",
		Short: "Print the drift recorded in a custom resource's status, or on an object a decorator decorates",
		Long: `drift reads a custom resource and prints, per object and field, what another
field manager changed: the desired and live values, who changed it and when,
and the diff. Under the Correct policy it shows what stencil last reverted.

KIND is the kind, its plural or short name (memcached, mywebs, web, ft, ...),
or a decorator's name (replicaset-podcount, namespace-defaults): NAME is then
the object it decorates, and drift prints what the decorator holds on it and
what it last set back (a decorator has no status of its own: see
docs/add-decorator.md).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDrift(cmd.Context(), project, args[0], namespace, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "Namespace of the resource.")
	project.bindKubeconfig(cmd.Flags())
	return cmd
}

func runDrift(ctx context.Context, project *operator, ref, namespace string, out io.Writer) error {
	kindName, name, ok := strings.Cut(ref, "/")
	if !ok || name == "" {
		return fmt.Errorf("%q: want KIND/NAME, as in myweb/myweb", ref)
	}
	if d, err := findDecorator(project, kindName); err != nil || d != nil {
		if err != nil {
			return err
		}
		return runDecoratorDrift(ctx, project, d, name, namespace, out)
	}
	kind, err := findKind(project, kindName)
	if err != nil {
		return err
	}
	c, err := newClient(project)
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
			fmt.Fprintf(out, "  %s: desired %s, live %s%s\n", f.Path, orNone(f.Desired), orNone(f.Live), byWhom(f))
		}
		if o.Diff != "" {
			fmt.Fprintf(out, "%s\n", indent(o.Diff, "  "))
		}
	}
	return out.String()
}

// byWhom is " by <manager> at <time>", as far as f knows them.
func byWhom(f v1alpha1.FieldDrift) string {
	by := ""
	if f.Manager != "" {
		by = " by " + f.Manager
	}
	if f.Time != nil {
		by += " at " + f.Time.UTC().Format("2006-01-02 15:04:05Z")
	}
	return by
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
func findKind(project *operator, name string) (*render.Kind, error) {
	loaded, err := project.Load()
	if err != nil {
		return nil, err
	}
	name = strings.ToLower(name)
	var known []string
	for _, k := range loaded {
		kind := strings.ToLower(k.GroupVersionKind().Kind)
		if name == kind || name == render.Plural(kind) || project.HasShortName(k.GroupVersionKind().Kind, name) {
			return k, nil
		}
		known = append(known, kind)
	}
	return nil, fmt.Errorf("unknown kind %q; stencil knows %s", name, strings.Join(known, ", "))
}

// findDecorator returns the decorator named name, or nil.
func findDecorator(project *operator, name string) (*render.Decorator, error) {
	decorators, err := project.LoadDecorators()
	if err != nil {
		return nil, err
	}
	for _, d := range decorators {
		if d.Name() == strings.ToLower(name) {
			return d, nil
		}
	}
	return nil, nil
}

func runDecoratorDrift(ctx context.Context, project *operator, d *render.Decorator, name, namespace string, out io.Writer) error {
	c, err := newClient(project)
	if err != nil {
		return err
	}
	parent := &unstructured.Unstructured{}
	parent.SetGroupVersionKind(d.Declaration().Decorates.GroupVersionKind())
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, parent); err != nil {
		return fmt.Errorf("reading %s %s: %w", parent.GetKind(), name, err)
	}
	text, err := formatDecoratorDrift(d.Name(), parent)
	if err != nil {
		return err
	}
	_, err = io.WriteString(out, text)
	return err
}

// formatDecoratorDrift is, for people, what decorator name holds on parent
// (from its managedFields) and what it last set back (its status
// annotation).
func formatDecoratorDrift(name string, parent *unstructured.Unstructured) (string, error) {
	out := &strings.Builder{}
	where := parent.GetName()
	if parent.GetNamespace() != "" {
		where = parent.GetNamespace() + "/" + where
	}
	fmt.Fprintf(out, "decorator %s on %s %s\n", name, parent.GetKind(), where)
	labels, annotations, err := decorator.Holds(parent, name)
	if err != nil {
		return "", err
	}
	if len(labels)+len(annotations) == 0 {
		out.WriteString("It holds nothing on it (not decorated, or given up).\n")
	}
	for _, k := range labels {
		fmt.Fprintf(out, "  holds label %s=%q\n", k, parent.GetLabels()[k])
	}
	for _, k := range annotations {
		fmt.Fprintf(out, "  holds annotation %s\n", k)
	}
	raw, ok := parent.GetAnnotations()[decorator.StatusAnnotation(name)]
	if !ok {
		out.WriteString("No drift recorded.\n")
		return out.String(), nil
	}
	st := decorator.Status{}
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		return "", fmt.Errorf("reading annotation %s: %w", decorator.StatusAnnotation(name), err)
	}
	if st.Reverted == 0 {
		out.WriteString("No drift recorded.\n")
		return out.String(), nil
	}
	fmt.Fprintf(out, "Set back %d time(s) after another manager changed it; the last:\n", st.Reverted)
	if f := st.Last; f != nil {
		fmt.Fprintf(out, "  %s: desired %s, was %s%s\n", f.Path, orNone(f.Desired), orNone(f.Live), byWhom(*f))
	}
	return out.String(), nil
}
