package render

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// Error is a render failure: a template that failed to execute, output that
// is not a valid manifest, or an object that breaks the kind's rules. Nothing
// may be applied or pruned after one.
type Error struct {
	// File is the template (or "kustomize") that produced the failure.
	File string
	// Line, when known (not 0), is the line of File that wrote the field a
	// Validator refused.
	Line int
	Err  error
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Err)
	}
	return e.File + ": " + e.Err.Error()
}
func (e *Error) Unwrap() error { return e.Err }

// Render returns the objects that obj's templates describe: executed with obj
// as data, run through kustomize when the folder has a kustomization.yaml,
// checked against the kind's rules, stamped with stencil's labels, annotations
// and ownerReference, and sorted. It is pure: same input, same output.
func (k *Kind) Render(obj v1alpha1.Object) ([]*unstructured.Unstructured, error) {
	return k.render(obj, GraphInput{}, nil)
}

// Validator checks a rendered object, for example against its type's schema
// (package render/schema).
type Validator interface {
	Validate(*unstructured.Unstructured) error
}

// RenderValidated is Render, and then checks every object with v; an
// object v refuses fails the render with an *Error naming its template.
// The operator renders without it (the API server validates what it
// applies); `stencil render`, `stencil lint` and the tests validate.
func (k *Kind) RenderValidated(obj v1alpha1.Object, v Validator) ([]*unstructured.Unstructured, error) {
	return k.render(obj, GraphInput{}, v)
}

func (k *Kind) render(obj v1alpha1.Object, in GraphInput, v Validator) ([]*unstructured.Unstructured, error) {
	if k.graph != nil {
		// Without a snapshot: the nodes that wait for none.
		plan, err := k.renderGraph(obj, GraphInput{Generated: in.Generated}, v)
		if err != nil {
			return nil, err
		}
		return plan.Objects, nil
	}
	run, err := k.execution(k.limits.Bytes, "rendered bytes")
	if err != nil {
		return nil, err
	}
	defer k.runs.put(run)
	k.startRender(run, obj, in)
	var objs []*unstructured.Unstructured
	if k.kustomize {
		objs, err = k.renderKustomized(run, obj)
	} else {
		objs, err = k.renderPlain(run, obj)
	}
	if err != nil {
		return nil, err
	}
	if len(objs) > k.limits.Objects {
		return nil, &Error{File: "(all templates)", Err: &LimitError{Limit: "rendered objects", Max: strconv.Itoa(k.limits.Objects)}}
	}
	owner := newOwner(k.ownerGVK(), obj)
	seen := map[string]bool{}
	for _, o := range objs {
		if err := k.written.check(o); err != nil {
			return nil, err
		}
		if err := k.finishObject(o, owner, v, seen); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(objs, func(a, b *unstructured.Unstructured) int { return strings.Compare(objectID(a), objectID(b)) })
	return objs, nil
}

// finishObject checks a rendered object against the kind's rules and
// against v (when not nil), and stamps it; seen holds the objects of the
// render so far, which it may not repeat.
func (k *Kind) finishObject(o *unstructured.Unstructured, own owner, v Validator, seen map[string]bool) error {
	file := o.GetAnnotations()[sourceAnnotation]
	if err := k.check(o, own); err != nil {
		return &Error{File: file, Err: err}
	}
	id := objectID(o)
	if seen[id] {
		return &Error{File: file, Err: fmt.Errorf("%s is rendered twice", id)}
	}
	seen[id] = true
	if err := stamp(o, own); err != nil {
		return err
	}
	if v != nil {
		if err := v.Validate(o); err != nil {
			return &Error{File: file, Line: k.locate(file, o.GetKind(), err), Err: err}
		}
	}
	return nil
}

// sourceAnnotation records, during render only, which template produced an
// object, so that errors can name it. stamp removes it.
const sourceAnnotation = "render.stencil.dev/source"

func (k *Kind) renderPlain(run *execution, obj v1alpha1.Object) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for _, file := range k.manifests {
		out, err := k.executeFile(run, file, obj)
		if err != nil {
			return nil, &Error{File: file, Err: err}
		}
		docs, err := decode(out, run.within(k.limits, len(objs)))
		if err != nil {
			return nil, &Error{File: file, Err: err}
		}
		docs = k.chart.withoutTests(docs)
		for _, d := range docs {
			setSource(d, file)
		}
		objs = append(objs, docs...)
	}
	return objs, nil
}

// renderKustomized writes every template's output and the rendered
// kustomization.yaml into an in-memory folder and runs kustomize on it.
func (k *Kind) renderKustomized(run *execution, obj v1alpha1.Object) ([]*unstructured.Unstructured, error) {
	mem := filesys.MakeFsInMemory()
	for _, file := range append(slices.Clone(k.manifests), kustomizationFile) {
		out, err := k.executeFile(run, file, obj)
		if err != nil {
			return nil, &Error{File: file, Err: err}
		}
		if err := mem.WriteFile("/"+file, out); err != nil {
			return nil, &Error{File: file, Err: err}
		}
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, "/")
	if err != nil {
		return nil, &Error{File: kustomizationFile, Err: err}
	}
	out, err := res.AsYaml()
	if err != nil {
		return nil, &Error{File: kustomizationFile, Err: err}
	}
	objs, err := decode(out, run.within(k.limits, 0))
	if err != nil {
		return nil, &Error{File: kustomizationFile, Err: err}
	}
	for _, o := range objs {
		setSource(o, kustomizationFile)
	}
	return objs, nil
}

func setSource(o *unstructured.Unstructured, file string) {
	ann := o.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[sourceAnnotation] = file
	o.SetAnnotations(ann)
}

// objectID identifies an object within one render, and orders the output.
func objectID(o *unstructured.Unstructured) string {
	gvk := o.GroupVersionKind()
	return gvk.Group + "/" + gvk.Kind + "/" + o.GetNamespace() + "/" + o.GetName()
}

// executeFile runs one of k's template files for obj: with obj as dot, or
// a chart kind's with Helm's objects (and, as Helm does, "<no value>"
// written as nothing).
func (k *Kind) executeFile(run *execution, file string, obj v1alpha1.Object) ([]byte, error) {
	if k.chart == nil {
		return run.execute(file, obj)
	}
	if run.valuesOf != obj {
		values, err := k.chart.valuesOf(obj)
		if err != nil {
			return nil, err
		}
		run.values, run.valuesOf = values, obj
	}
	data := k.helmData(obj, run.values, file)
	if data == nil {
		return nil, nil
	}
	run.b.gen.startManifest()
	out, err := run.execute(file, data)
	if err != nil {
		return nil, err
	}
	return bytes.ReplaceAll(out, []byte("<no value>"), nil), nil
}
