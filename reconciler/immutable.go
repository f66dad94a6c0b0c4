package reconciler

import (
	"errors"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// immutableFields are the fields that err, an apply's error, says cannot
// change: the API server answers 422 Invalid with one cause per field,
// whose message says so in one of the API's wordings (immutableWordings).
// None for any other error.
func immutableFields(err error) []string {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return nil
	}
	var fields []string
	for _, c := range status.Status().Details.Causes {
		if slices.ContainsFunc(immutableWordings, func(w string) bool { return strings.Contains(c.Message, w) }) {
			fields = append(fields, c.Field)
		}
	}
	return fields
}

// immutableWordings are how the API server's validation says a field
// cannot change: "field is immutable" (most types; a ConfigMap's "field is
// immutable when `immutable` is set"), a PersistentVolumeClaim's "spec is
// immutable after creation", a Service's clusterIP "may not change once
// set", a StatefulSet's "updates to statefulset spec for fields other than
// ... are forbidden".
var immutableWordings = []string{apimachineryvalidation.FieldImmutableErrorMsg, "is immutable", "may not change once set", "updates to statefulset spec for fields other than"}

// immutableError is an apply that the API server refused because it would
// change fields that cannot change.
type immutableError struct {
	object *unstructured.Unstructured
	fields []string
	err    error
}

func (e immutableError) Error() string {
	d := e.object
	gvk := d.GroupVersionKind()
	resource := strings.ToLower(gvk.Kind)
	if gvk.Group != "" {
		resource += "." + gvk.Group
	}
	del := "kubectl delete " + resource + " " + d.GetName()
	if ns := d.GetNamespace(); ns != "" {
		del += " -n " + ns
	}
	return gvk.Kind + " " + quoted(d.GetNamespace(), d.GetName()) + ": the new render changes " + strings.Join(e.fields, ", ") +
		", which the API server does not let change once set. stencil leaves the object as it is. Change the spec or template back, or delete the object and stencil creates it anew (" + del + ")"
}

func (e immutableError) Unwrap() error { return e.err }
