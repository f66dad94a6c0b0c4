package kinds_test

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/render"
	"github.com/stencil-operator/stencil/render/kindtest"
)

// convergeGraph renders a graph kind's resource as the cluster would see
// it converge: each render's objects become the live objects of the next,
// made ready (a workload's status caught up, a Job complete; a createOnly
// object kept as first made), until no node waits or nothing changes. Its
// inputs are random objects, made as the render reads them: present or
// missing, with random data or none, or binaryData only. It returns the
// last render's objects, and the template's own refusal of its input (a
// fail call) as refused rather than as an error.
func convergeGraph(r *rand.Rand, k *render.Kind, cr v1alpha1.Object, v render.Validator) (objs []*unstructured.Unstructured, refused bool, err error) {
	inputs := &randomInputs{r: r, made: map[string]*unstructured.Unstructured{}}
	var live render.Objects
	for range 10 {
		plan, err := k.RenderGraphValidated(cr, render.GraphInput{Live: live, Inputs: inputs, Random: render.FixedRandom()}, v)
		if err != nil {
			if strings.Contains(err.Error(), "error calling fail") {
				return nil, true, nil
			}
			return nil, false, fmt.Errorf("%w (inputs: %s)", err, inputs)
		}
		next := settled(plan.Objects, live)
		objs = plan.Objects
		if len(plan.Waiting) == 0 || len(next) == len(live) {
			return objs, false, nil
		}
		live = next
	}
	return objs, false, nil
}

// settled are the live objects after rendered is applied over live: each
// ready, a createOnly one as it was first made.
func settled(rendered []*unstructured.Unstructured, live render.Objects) render.Objects {
	var out render.Objects
	for _, d := range rendered {
		if d.GetAnnotations()[v1alpha1.AnnotationSSA] == v1alpha1.SSAIfNotPresent {
			if o, _ := live.Get(d.GroupVersionKind(), d.GetNamespace(), d.GetName()); o != nil {
				out = append(out, o)
				continue
			}
		}
		out = append(out, kindtest.Healthy(d.DeepCopy()))
	}
	return out
}

// randomInputs is a render.Snapshot of random inputs, each made once, as
// the render first reads it.
type randomInputs struct {
	r    *rand.Rand
	made map[string]*unstructured.Unstructured
}

func (in *randomInputs) Get(gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	key := gvk.String() + "/" + namespace + "/" + name
	if o, ok := in.made[key]; ok {
		return o, nil
	}
	var o *unstructured.Unstructured
	if in.r.IntN(8) > 0 { // missing one time in eight
		o = randomInput(in.r, gvk, namespace, name)
	}
	in.made[key] = o
	return o, nil
}

func (in *randomInputs) List(gvk schema.GroupVersionKind, namespace string, selector labels.Selector) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for i := range in.r.IntN(3) {
		o := randomInput(in.r, gvk, namespace, fmt.Sprintf("listed-%d", i))
		if set, ok := selectorLabels(selector); ok {
			o.SetLabels(set)
			out = append(out, o)
		}
	}
	return out, nil
}

func (in *randomInputs) String() string {
	var b strings.Builder
	for key, o := range in.made {
		if o == nil {
			fmt.Fprintf(&b, "%s: missing; ", key)
			continue
		}
		fmt.Fprintf(&b, "%s: data %v, binaryData %v; ", key, o.Object["data"], o.Object["binaryData"])
	}
	return b.String()
}

// selectorLabels are labels that an equality selector matches.
func selectorLabels(s labels.Selector) (map[string]string, bool) {
	reqs, selectable := s.Requirements()
	if !selectable {
		return nil, false
	}
	set := map[string]string{}
	for _, req := range reqs {
		v, ok := req.Values().PopAny()
		if !ok {
			return nil, false
		}
		set[req.Key()] = v
	}
	return set, s.Matches(labels.Set(set))
}

// randomInput is an object of type gvk as a person may make it: a
// ConfigMap or Secret without data, with random keys and values, or with
// binaryData only.
func randomInput(r *rand.Rand, gvk schema.GroupVersionKind, namespace, name string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{}}
	o.SetGroupVersionKind(gvk)
	o.SetNamespace(namespace)
	o.SetName(name)
	if gvk.Group != "" || (gvk.Kind != "ConfigMap" && gvk.Kind != "Secret") {
		return o
	}
	data := map[string]any{}
	for range r.IntN(5) {
		value := randomString(r, 0, 40)
		if gvk.Kind == "Secret" {
			value = "c2VjcmV0" // base64 of "secret"
		}
		data[randomDataKey(r)] = value
	}
	switch r.IntN(4) {
	case 0: // no data at all: kubectl create configmap NAME
	case 1:
		o.Object["binaryData"] = map[string]any{randomDataKey(r): "iVBORw0KGgo="}
	default:
		o.Object["data"] = data
	}
	return o
}

// randomDataKey is a valid key of a ConfigMap's or Secret's data.
func randomDataKey(r *rand.Rand) string {
	const chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._"
	var b strings.Builder
	for range 1 + r.IntN(20) {
		b.WriteByte(chars[r.IntN(len(chars))])
	}
	if s := b.String(); s != "." && s != ".." {
		return s
	}
	return "key"
}
