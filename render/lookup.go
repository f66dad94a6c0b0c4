package render

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// lookups is what Helm's lookup answers in a chart kind's render: the
// resource's own objects, by name, as the render's live objects hold them
// (the operator's cache, or the API server for stencil diff). Anything
// else (another owner's object, an undeclared type, a list, a render with
// no live objects: stencil render, test, lint and import) is an empty
// map, as `helm template` answers: a tenant's values name what to look up,
// and may not read what is not the resource's.
type lookups struct {
	owns      map[schema.GroupVersionKind]TypeRef
	live      Snapshot // nil: none
	uid       types.UID
	namespace string
}

// lookup is Helm's lookup of a chart kind's execution charging b.
func (b *budget) lookup(apiVersion, kind, namespace, name string) (map[string]any, error) {
	l := b.lookups
	if l == nil {
		return lookup(apiVersion, kind, namespace, name) // not a chart kind: refused
	}
	gvk := schema.FromAPIVersionAndKind(apiVersion, kind)
	if _, owned := l.owns[gvk]; !owned || l.live == nil || l.uid == "" || name == "" || namespace != "" && namespace != l.namespace {
		return map[string]any{}, nil
	}
	o, err := l.live.Get(gvk, namespace, name)
	if err != nil {
		// A failed read (a timeout, a type not served yet) is retried,
		// unlike a template's error.
		return nil, &ReadError{Err: fmt.Errorf("lookup %s %s %q: %w", apiVersion, kind, name, err)}
	}
	if o == nil || o.GetLabels()[v1alpha1.LabelOwnerUID] != string(l.uid) {
		return map[string]any{}, nil
	}
	out := runtime.DeepCopyJSON(o.Object)
	return out, b.spend(deepSize(out, b.left))
}

// startRender prepares run for a render of obj with in: the generated
// values and the live objects lookup reads, for a chart kind.
func (k *Kind) startRender(run *execution, obj v1alpha1.Object, in GraphInput) {
	if k.chart != nil {
		run.b.lookups = &lookups{owns: k.owns, live: in.Live, uid: obj.GetUID(), namespace: obj.GetNamespace()}
	}
	if k.generates {
		run.b.gen = &generation{g: in.Generated, count: map[string]int{}, manifests: k.manifestNames}
	}
}
