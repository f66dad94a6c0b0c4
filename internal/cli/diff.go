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
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/reconciler"
	"github.com/stencil-operator/stencil/reconciler/engine"
	"github.com/stencil-operator/stencil/render"
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

func newDiffCommand(project *operator) *cobra.Command {
	var file, namespace string
	var all bool
	fleet := fleetOptions{}
	cmd := &cobra.Command{
		Use:   "diff (-f FILE | --all [-v])",
		Short: "Diff what the operator would apply for custom resources against the cluster",
		Long: `diff renders custom resources, as the operator would, asks the API server
what each object would become (server-side apply, dry run, field manager
stencil) and prints a unified diff per object against the live one, like
kubectl diff. Secret values are masked. Nothing is written.

With -f it diffs the resources of a file. With --all it previews an upgrade
of stencil: it renders every custom resource of every kind in the cluster
with this binary's templates and prints, per kind, how many resources would
stay unchanged, change or fail to render, and how many objects would be
created, changed or pruned. It counts only the prunes the operator would
make: none for a resource that renders no objects while it has some (it
fails: stencil takes that for a template mistake) or that has an object in
the way (someone else's, or on its way out). -v adds what happens to each
resource and the diffs. Run it with the new binary before you deploy it,
or with --templates on the project's edited templates folder.

Exit status: 0 no differences, 1 differences, 2 or more an error (with
--all, also when a resource fails with the new templates: see FAILING).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var different, failed bool
			var err error
			switch {
			case all == (file != ""):
				return &exitError{code: 2, err: errors.New("give either -f FILE or --all")}
			case all:
				different, failed, err = runFleetDiff(cmd.Context(), project, fleet, cmd.OutOrStdout())
				if err == nil && failed {
					err = errors.New("some resources fail to render or to diff with these templates (see FAILING; -v says why)")
				}
			default:
				different, err = runDiff(cmd.Context(), project, fleet.templates, file, namespace, cmd.InOrStdin(), cmd.OutOrStdout())
			}
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			if different {
				return errDifferent
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", `File of custom resources ("-" for standard input).`)
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "Namespace of resources that name none.")
	cmd.Flags().BoolVar(&all, "all", false, "Diff every custom resource of every kind in the cluster (an upgrade preview).")
	cmd.Flags().StringVar(&fleet.templates, "templates", "", "Render with the kinds' folders under this folder (laid out as templates/) instead of the built-in ones: preview edited templates, or a chart's next version (stencil import chart), before you build.")
	cmd.Flags().BoolVarP(&fleet.verbose, "verbose", "v", false, "With --all: print what happens to each resource that differs, and the diffs.")
	cmd.Flags().IntVar(&fleet.concurrency, "concurrency", 16, "With --all: resources diffed at once.")
	cmd.Flags().Float32Var(&fleet.qps, "kube-api-qps", 300, "With --all: client-side limit on requests per second to the API server, all types together.")
	cmd.Flags().IntVar(&fleet.burst, "kube-api-burst", 600, "With --all: client-side burst of requests to the API server.")
	project.bindKubeconfig(cmd.Flags())
	return cmd
}

func runDiff(ctx context.Context, project *operator, templates, file, namespace string, stdin io.Reader, out io.Writer) (bool, error) {
	loaded, err := project.kindsIn(templates)
	if err != nil {
		return false, err
	}
	crs, err := readResourcesOf(file, stdin, namespace, loaded, nil)
	if err != nil {
		return false, err
	}
	c, err := newClient(project)
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
		gen, err := reconciler.ReadGenerated(ctx, c, cr.kind, cr.obj)
		if err != nil {
			return false, fmt.Errorf("%s %s: %w", cr.kind.GroupVersionKind().Kind, cr.obj.GetName(), err)
		}
		plan, err := cr.kind.RenderGraph(cr.obj, render.GraphInput{Live: reconciler.ReadSnapshot(ctx, c), Generated: gen})
		if err != nil {
			return false, fmt.Errorf("rendering %s %s: %w", cr.kind.GroupVersionKind().Kind, cr.obj.GetName(), err)
		}
		for _, w := range plan.Waiting {
			if _, err := fmt.Fprintf(out, "# %s %s: %s: not rendered, its objects are left as they are\n", cr.kind.GroupVersionKind().Kind, cr.obj.GetName(), w); err != nil {
				return false, err
			}
		}
		for _, o := range plan.Objects {
			live, err := readLive(ctx, c, o)
			if err != nil {
				return false, err
			}
			d, err := diffObjectOf(ctx, c, o, live, cr.obj.StencilDriftPolicy() == v1alpha1.DriftReport)
			if errors.Is(err, engine.ErrNotOurs) {
				d, err = "# "+err.Error()+"\n", nil
			}
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

// readLive reads the live object of o; nil when there is none.
func readLive(ctx context.Context, c client.Reader, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(o.GroupVersionKind())
	err := c.Get(ctx, client.ObjectKeyFromObject(o), live)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading %s %s: %w", o.GetKind(), objectName(o.GetNamespace(), o.GetName()), err)
	}
	return live, nil
}

// diffObjectOf dry-runs the apply of o, as the operator would make it
// (report: drift policy Report), and diffs the result against live (nil: o
// does not exist).
func diffObjectOf(ctx context.Context, c client.Client, o, live *unstructured.Unstructured, report bool) (string, error) {
	name := o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
	body, applies, err := engine.PreviewBody(o, live, report)
	if err != nil || !applies {
		return "", err
	}
	merged := body.DeepCopy()
	err = c.Apply(ctx, client.ApplyConfigurationFromUnstructured(merged), client.FieldOwner(engine.FieldManager), client.ForceOwnership, client.DryRunAll)
	if err != nil {
		return "", fmt.Errorf("dry-run apply of %s: %w", name, err)
	}
	if rv := merged.GetResourceVersion(); live != nil && live.GetResourceVersion() != rv || live == nil && rv != "" {
		// The object changed (or came) since it was read: compare with
		// what the dry run started from.
		if live, err = readLive(ctx, c, o); err != nil {
			return "", err
		}
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

// comparable is an object as YAML without its status (an apply does not
// change it, and it may change between two reads) and the fields every
// write changes, with Secret values masked.
func comparable(o *unstructured.Unstructured) (string, error) {
	if o == nil {
		return "", nil
	}
	c := o.DeepCopy()
	for _, f := range [][]string{{"metadata", "managedFields"}, {"metadata", "resourceVersion"}, {"metadata", "generation"}, {"status"}} {
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
func newClient(project *operator) (client.Client, error) {
	return newClientWith(project, 0, 0)
}

// newClientWith is newClient with client-side limits on requests (0: the
// defaults).
func newClientWith(project *operator, qps float32, burst int) (client.Client, error) {
	cfg, err := project.restConfig()
	if err != nil {
		return nil, err
	}
	if qps > 0 {
		// One limiter for every resource type: the client makes a REST
		// client per type, each with its own limiter from QPS and Burst.
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(qps, max(burst, 1))
	}
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), project.AddTo(scheme)); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}
