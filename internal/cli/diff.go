package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/pmezard/go-difflib/difflib"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/internal/kinds"
	"github.com/stencil-operator/stencil/reconciler"
)

// exitError ends the process with a given code, as `kubectl diff` does:
// 1 when there are differences, above 1 on error.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// errDifferent is returned by diff when the cluster differs from the render.
var errDifferent = &exitError{code: 1, err: errors.New("the cluster differs from the render")}

func newDiffCommand() *cobra.Command {
	var file, namespace string
	cmd := &cobra.Command{
		Use:   "diff -f FILE",
		Short: "Diff what the operator would apply for custom resources against the cluster",
		Long: `diff renders a file of custom resources, as the operator would, asks the API
server what each object would become (server-side apply, dry run, field
manager stencil) and prints a unified diff per object against the live one,
like kubectl diff. Secret values are masked.

Exit status: 0 no differences, 1 differences, 2 or more an error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			different, err := runDiff(cmd.Context(), file, namespace, cmd.InOrStdin(), cmd.OutOrStdout())
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			if different {
				return errDifferent
			}
			return nil
		},
	}
	bindInputFlags(cmd, &file, &namespace)
	return cmd
}

func runDiff(ctx context.Context, file, namespace string, stdin io.Reader, out io.Writer) (bool, error) {
	crs, err := readResources(file, stdin, namespace)
	if err != nil {
		return false, err
	}
	c, err := newClient()
	if err != nil {
		return false, err
	}
	different := false
	for _, cr := range crs {
		// The live resource's UID goes into the owner label and reference.
		live := cr.kind.New()
		switch err := c.Get(ctx, client.ObjectKeyFromObject(cr.obj), live); {
		case err == nil:
			cr.obj.SetUID(live.GetUID())
		case !apierrors.IsNotFound(err):
			return false, fmt.Errorf("reading %s %s: %w", cr.kind.GroupVersionKind().Kind, cr.obj.GetName(), err)
		}
		objs, err := cr.kind.Render(cr.obj)
		if err != nil {
			return false, fmt.Errorf("rendering %s %s: %w", cr.kind.GroupVersionKind().Kind, cr.obj.GetName(), err)
		}
		for _, o := range objs {
			d, err := diffObject(ctx, c, o)
			if err != nil {
				return false, err
			}
			if d == "" {
				continue
			}
			different = true
			if _, err := io.WriteString(out, d); err != nil {
				return false, err
			}
		}
	}
	return different, nil
}

// diffObject dry-runs the apply of o and diffs the result against the live
// object.
func diffObject(ctx context.Context, c client.Client, o *unstructured.Unstructured) (string, error) {
	name := o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(o.GroupVersionKind())
	err := c.Get(ctx, client.ObjectKeyFromObject(o), live)
	switch {
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		return "", fmt.Errorf("reading %s: %w", name, err)
	}
	merged := o.DeepCopy()
	err = c.Apply(ctx, client.ApplyConfigurationFromUnstructured(merged), client.FieldOwner(reconciler.FieldManager), client.ForceOwnership, client.DryRunAll)
	if err != nil {
		return "", fmt.Errorf("dry-run apply of %s: %w", name, err)
	}
	a, err := comparable(live)
	if err != nil {
		return "", err
	}
	b, err := comparable(merged)
	if err != nil {
		return "", err
	}
	if a == b {
		return "", nil
	}
	return difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(a), B: difflib.SplitLines(b),
		FromFile: "live/" + name, ToFile: "merged/" + name, Context: 3,
	})
}

// comparable is an object as YAML without the fields every write changes,
// with Secret values masked.
func comparable(o *unstructured.Unstructured) (string, error) {
	if o == nil {
		return "", nil
	}
	c := o.DeepCopy()
	for _, f := range [][]string{{"metadata", "managedFields"}, {"metadata", "resourceVersion"}, {"metadata", "generation"}} {
		unstructured.RemoveNestedField(c.Object, f...)
	}
	if c.GetKind() == "Secret" && c.GroupVersionKind().Group == "" {
		for _, field := range []string{"data", "stringData"} {
			if values, ok := c.Object[field].(map[string]any); ok {
				for k := range values {
					values[k] = "(masked)"
				}
			}
		}
	}
	out, err := yaml.Marshal(c.Object)
	return string(out), err
}

// newClient is a client of the current kubeconfig that knows stencil's kinds.
func newClient() (client.Client, error) {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), kinds.AddToScheme(scheme)); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}
