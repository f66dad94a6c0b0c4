package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/reconciler"
	"github.com/stencil-operator/stencil/render"
	"github.com/stencil-operator/stencil/render/kindtest"
	renderschema "github.com/stencil-operator/stencil/render/schema"
)

func newRenderCommand(project *operator) *cobra.Command {
	var file, namespace, observed string
	src := templateSource{project: project}
	validate, live := true, false
	cmd := &cobra.Command{
		Use:   "render -f FILE",
		Short: "Print the objects the operator would apply for custom resources, offline",
		Long: `render runs a file of custom resources through the operator's own render
code, with no cluster and no network, and prints the objects the operator
would apply, as a YAML stream (like helm template).

Every object is checked against its type's schema first, as the API server
would check it: the built-in types' schemas are built in, custom resource
types' come from the CRDs given with --crds (by default config/crd/bases and
config/crd/external in the working directory). An invalid object fails the
command (exit code 2) with the template, the object and the field. Each
custom resource is first defaulted by its kind's CRD, as the API server
stores it.
--templates renders the kinds' folders on disk instead of the built-in ones.

A resource without metadata.uid renders with an empty owner UID; give it
the live resource (kubectl get <kind> <name> -o yaml) to see exactly what
the operator applies.

A graph kind's templates read live objects: the resource's own earlier
objects (to know which nodes' turn has come, and their values) and its
inputs. Without them only the nodes that wait for nothing render; give them
with --observed (a file of objects, such as kubectl get -o yaml prints), or
read them from the cluster with --live. The nodes that wait are listed on
standard error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			folders, v, err := src.load()
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			crs, err := readResourcesOf(file, cmd.InOrStdin(), namespace, kindsOf(folders), &lenient{v: v, warn: cmd.ErrOrStderr(), warned: map[schema.GroupVersionKind]bool{}})
			if err != nil {
				return err
			}
			in, err := graphInput(cmd.Context(), project, observed, live)
			if err != nil {
				return err
			}
			for _, cr := range crs {
				if err := liveUID(cr, in); err != nil {
					return err
				}
				plan, err := renderPlanChecked(cr, checked(v, validate), cmd.ErrOrStderr(), in)
				if err != nil {
					return &exitError{code: 2, err: fmt.Errorf("rendering %s %s: %w", cr.kind.GroupVersionKind().Kind, cr.obj.GetName(), placeError(err, folderOf(cr.kind)))}
				}
				if err := writeYAML(cmd.OutOrStdout(), plan.Objects); err != nil {
					return err
				}
				writeWaiting(cmd.ErrOrStderr(), cr.kind.GroupVersionKind().Kind, cr.obj.GetName(), plan)
			}
			return nil
		},
	}
	bindInputFlags(cmd, &file, &namespace)
	src.bindFlags(cmd)
	cmd.Flags().BoolVar(&validate, "validate", true, "Check every object against its type's schema.")
	cmd.Flags().StringVar(&observed, "observed", "", "A graph kind's live objects (its own and its inputs), as a file of objects.")
	cmd.Flags().BoolVar(&live, "live", false, "Read a graph kind's live objects from the cluster (the current kubeconfig context).")
	cmd.MarkFlagsMutuallyExclusive("observed", "live")
	project.bindKubeconfig(cmd.Flags())
	return cmd
}

// checked is v when validate, else nil: render without validation.
func checked(v *renderschema.Validator, validate bool) *renderschema.Validator {
	if !validate {
		return nil
	}
	return v
}

// liveUID gives a resource without metadata.uid the UID of the live one,
// from the objects a graph kind's render reads (--observed or --live) when
// they hold it: its objects carry that UID in their owner label, and are
// not this resource's without it.
func liveUID(cr resource, in render.GraphInput) error {
	if cr.obj.GetUID() != "" || in.Live == nil || cr.kind.Graph() == nil {
		return nil
	}
	live, err := in.Live.Get(cr.kind.GroupVersionKind(), cr.obj.GetNamespace(), cr.obj.GetName())
	if err != nil {
		return fmt.Errorf("reading %s %s: %w", cr.kind.GroupVersionKind().Kind, cr.obj.GetName(), err)
	}
	if live != nil {
		cr.obj.SetUID(live.GetUID())
	}
	return nil
}

// graphInput is what a graph kind's render reads: the objects of the
// file observed, or the cluster's (live), or none.
func graphInput(ctx context.Context, project *operator, observed string, live bool) (render.GraphInput, error) {
	switch {
	case observed != "":
		objs, err := readObserved(observed)
		return render.GraphInput{Live: objs}, err
	case live:
		c, err := newClient(project)
		if err != nil {
			return render.GraphInput{}, err
		}
		return render.GraphInput{Live: reconciler.ReadSnapshot(ctx, c)}, nil
	}
	return render.GraphInput{}, nil
}

// resource is one custom resource read from a file, with its kind.
type resource struct {
	kind *render.Kind
	obj  v1alpha1.Object
	// doc is the resource's document as written.
	doc []byte
}

// readResourcesOf reads a YAML stream of custom resources of the loaded
// kinds, defaulted with d (when not nil) as the API server would store
// them.
func readResourcesOf(file string, stdin io.Reader, namespace string, loaded []*render.Kind, d kindtest.Defaulter) ([]resource, error) {
	byGVK := map[schema.GroupVersionKind]*render.Kind{}
	var known []string
	for _, k := range loaded {
		byGVK[k.GroupVersionKind()] = k
		known = append(known, k.GroupVersionKind().Kind+" ("+k.GroupVersionKind().GroupVersion().String()+")")
	}
	data, err := readFile(file, stdin)
	if err != nil {
		return nil, err
	}
	var out []resource
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for n := 1; ; n++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", file, n, err)
		}
		probe := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &probe.Object); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", file, n, err)
		}
		if len(probe.Object) == 0 {
			continue
		}
		k, ok := byGVK[probe.GroupVersionKind()]
		if !ok {
			return nil, fmt.Errorf("%s: document %d: unknown kind %q (apiVersion %q); stencil knows %s", file, n, probe.GetKind(), probe.GetAPIVersion(), strings.Join(known, ", "))
		}
		obj, err := kindtest.Decode(k, doc, d)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: invalid %s: %w", file, n, k.GroupVersionKind().Kind, err)
		}
		if obj.GetNamespace() == "" {
			obj.SetNamespace(namespace)
		}
		out = append(out, resource{kind: k, obj: obj, doc: doc})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no custom resources", file)
	}
	return out, nil
}

func readFile(file string, stdin io.Reader) ([]byte, error) {
	if file == "-" {
		return io.ReadAll(stdin)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return data, nil
}

// writeYAML prints objects as a YAML stream, each preceded by "---".
func writeYAML(w io.Writer, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		out, err := yaml.Marshal(o.Object)
		if err != nil {
			return fmt.Errorf("encoding %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		if _, err := fmt.Fprintf(w, "---\n%s", out); err != nil {
			return err
		}
	}
	return nil
}

// bindInputFlags adds the flags of commands that read custom resources from
// a file: -f (required) and -n.
func bindInputFlags(cmd *cobra.Command, file, namespace *string) {
	cmd.Flags().StringVarP(file, "filename", "f", "", `File of custom resources ("-" for standard input).`)
	cmd.Flags().StringVarP(namespace, "namespace", "n", "default", "Namespace of resources that name none.")
	_ = cmd.MarkFlagRequired("filename")
}
