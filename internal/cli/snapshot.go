package cli

import (
	"fmt"
	"io"
	"os"

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

// writeWaiting tells, on w, which nodes of a graph wait and for what.
func writeWaiting(w io.Writer, kind, name string, plan *render.Plan) {
	for _, n := range plan.Waiting {
		_, _ = fmt.Fprintf(w, "%s %s: not rendered: %s\n", kind, name, n)
	}
}
