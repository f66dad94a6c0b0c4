package reconciler

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// withholdSecretData replaces the apply errors that may be about an object
// rendered by a node whose template read Secret data, a Secret input's or
// the graph's own Secrets' (render.Kind.SecretNode): the API server quotes
// what it refuses ("Invalid value: ..."), and so may a webhook or a
// policy. An error that names its object (the API status's details) is
// withheld when such a node rendered one of that name; an error that names
// none, whenever such a node rendered anything. Each withheld error keeps
// its API status code, reason and cause types, so that what the reconciler
// decides on them stands, with a fixed message that names the nodes, never
// a value, a name or a length.
func (r *Reconciler) withholdSecretData(desired []*unstructured.Unstructured, errs []error) []error {
	held := map[string]string{} // object name → node
	var nodes []string
	for _, d := range desired {
		if node := r.kind().SecretNode(d, desired); node != "" {
			held[d.GetName()] = node
			if !slices.Contains(nodes, node) {
				nodes = append(nodes, node)
			}
		}
	}
	if len(held) == 0 {
		return errs
	}
	out := make([]error, 0, len(errs))
	for _, err := range errs {
		if err == nil {
			continue
		}
		var status apierrors.APIStatus
		named := errors.As(err, &status) && status.Status().Details != nil && status.Status().Details.Name != ""
		switch {
		case !named:
			out = append(out, withheldStatus(err, "an apply failed that may concern an object of "+nodeList(nodes)+", which reads Secret data; its message is withheld, as it may quote the data"))
		case held[status.Status().Details.Name] != "":
			out = append(out, withheldStatus(err, "the API server refused an object of "+nodeList([]string{held[status.Status().Details.Name]})+", which reads Secret data; its message is withheld, as it may quote the data: as someone who may read the Secret, apply the render with kubectl apply --server-side --dry-run=server to see it"))
		default:
			out = append(out, err)
		}
	}
	return out
}

// withheldStatus is err's API status (code, reason and the types of its
// causes, none of their messages) with message msg; msg alone when err has
// no API status.
func withheldStatus(err error, msg string) error {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return errors.New(msg)
	}
	s := status.Status()
	held := metav1.Status{Status: s.Status, Code: s.Code, Reason: s.Reason, Message: msg}
	if s.Details != nil {
		held.Details = &metav1.StatusDetails{Group: s.Details.Group, Kind: s.Details.Kind}
		for _, c := range s.Details.Causes {
			held.Details.Causes = append(held.Details.Causes, metav1.StatusCause{Type: c.Type})
		}
	}
	return &apierrors.StatusError{ErrStatus: held}
}

// nodeList names graph nodes: node "a", or nodes "a" and "b".
func nodeList(nodes []string) string {
	quoted := make([]string, len(nodes))
	for i, n := range nodes {
		quoted[i] = strconv.Quote(n)
	}
	if len(quoted) == 1 {
		return "node " + quoted[0]
	}
	return "nodes " + strings.Join(quoted[:len(quoted)-1], ", ") + " and " + quoted[len(quoted)-1]
}
