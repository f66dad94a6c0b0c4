package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/render"
)

// A graph kind's render reads live objects: its own earlier objects and its
// inputs. Offline they come from a file (--observed), or from the cluster
// (--live).

// readObserved reads a YAML stream of objects (kubectl get -o yaml
// output, whose Lists are unpacked) as a snapshot.
func readObserved(file string) (render.Objects, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	objs, err := render.DecodeObjects(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return objs, nil
}

// liveSnapshot reads objects from the cluster.
type liveSnapshot struct {
	ctx context.Context
	c   client.Reader
}

func (s liveSnapshot) Get(gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err := s.c.Get(s.ctx, client.ObjectKey{Namespace: namespace, Name: name}, u)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return u, err
}

func (s liveSnapshot) List(gvk schema.GroupVersionKind, namespace string, selector labels.Selector) ([]*unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := s.c.List(s.ctx, list, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out, nil
}

// writeWaiting tells, on w, which nodes of a graph wait and for what.
func writeWaiting(w io.Writer, kind, name string, plan *render.Plan) {
	for _, n := range plan.Waiting {
		_, _ = fmt.Fprintf(w, "%s %s: not rendered: %s\n", kind, name, n)
	}
}
