package render

import (
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"text/template"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// A decorator is a kind whose parent is not a stencil custom resource but an
// existing type (a ReplicaSet, a Namespace) that someone else owns. Its
// templates may render the parent itself, holding only the labels and
// annotations stencil is to own on it (applied under stencil's field
// manager, never with an ownerReference, never deleted), and children next
// to it, owned through an ownerReference like any kind's objects.

// decoratorFile is a decorator folder's declaration.
const decoratorFile = "_decorator.yaml"

// DecoratorDeclaration is a decorator's _decorator.yaml.
type DecoratorDeclaration struct {
	// Decorates is the parent type, and which of its objects.
	Decorates Parent `json:"decorates"`
	// Owns lists the types of the children the templates may emit.
	Owns []TypeRef `json:"owns,omitempty"`
	// Observes lists objects the templates read, related to each parent.
	Observes []Observed `json:"observes,omitempty"`
}

// Parent is a decorator's parent type.
type Parent struct {
	TypeRef
	// Selector chooses the objects of the type that are decorated; unset,
	// all of them.
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// Observed are objects a decorator's templates read for each parent, found
// by labels the parent names or by ownerReference to it, in the parent's
// namespace. stencil caches them metadata-only.
type Observed struct {
	TypeRef
	// As is their name in the templates: .Observed.<As>, a list.
	As string `json:"as"`
	// MatchLabelsFrom is the path in the parent (dotted, e.g.
	// spec.template.metadata.labels) of a map of labels: the observed
	// objects are those that carry all of them.
	MatchLabelsFrom string `json:"matchLabelsFrom,omitempty"`
	// OwnedByParent: the observed objects are those with an
	// ownerReference to the parent.
	OwnedByParent bool `json:"ownedByParent,omitempty"`
}

// DecoratorData is what a decorator's templates see: the parent as it is
// in the cluster (.Object.metadata.name, .Object.spec…) and the observed
// objects (.Observed.<as>, lists of objects as maps).
type DecoratorData struct {
	Object   map[string]any
	Observed map[string][]map[string]any
}

// Decorator is a parsed decorator kind, ready to render. It is immutable
// and safe for concurrent use.
type Decorator struct {
	name        string
	declaration DecoratorDeclaration
	selector    labels.Selector
	owns        map[string]TypeRef // by "apiVersion/kind"
	tmpl        *template.Template
	manifests   []string
	limits      Limits
	runs        *executions // shared by the copies WithLimits makes
}

// WithLimits returns a copy of d that renders within l (the parent, and
// what a decorator observes, are inputs its templates do not control).
func (d *Decorator) WithLimits(l Limits) *Decorator {
	c := *d
	c.limits = l
	return &c
}

// LoadDecorator parses a decorator's folder, named name: *.yaml templates,
// _*.tpl helpers and its _decorator.yaml.
func LoadDecorator(name string, fsys fs.FS) (*Decorator, error) {
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return nil, fmt.Errorf("decorator %q: its name goes into a label value and an annotation key: %s", name, strings.Join(errs, "; "))
	}
	raw, err := fs.ReadFile(fsys, decoratorFile)
	if err != nil {
		return nil, fmt.Errorf("decorator %s: reading %s: %w", name, decoratorFile, err)
	}
	d := &Decorator{name: name, owns: map[string]TypeRef{}, limits: DefaultLimits}
	if err := yaml.UnmarshalStrict(raw, &d.declaration); err != nil {
		return nil, fmt.Errorf("decorator %s: parsing %s: %w", name, decoratorFile, err)
	}
	if err := d.check(); err != nil {
		return nil, fmt.Errorf("decorator %s: %s: %w", name, decoratorFile, err)
	}
	if d.tmpl, d.manifests, _, err = parseFolder(name, fsys, decoratorFile, ""); err != nil {
		return nil, fmt.Errorf("decorator %s: %w", name, err)
	}
	if len(d.manifests) == 0 {
		return nil, fmt.Errorf("decorator %s: no *.yaml templates", name)
	}
	d.runs = newExecutions(d.tmpl)
	return d, nil
}

// check validates the declaration and keeps its parsed parts.
func (d *Decorator) check() error {
	p := d.declaration.Decorates
	if p.APIVersion == "" || p.Kind == "" {
		return fmt.Errorf("decorates needs apiVersion and kind")
	}
	d.selector = labels.Everything()
	if p.Selector != nil {
		s, err := metav1.LabelSelectorAsSelector(p.Selector)
		if err != nil {
			return fmt.Errorf("decorates.selector: %w", err)
		}
		d.selector = s
	}
	for _, t := range d.declaration.Owns {
		d.owns[t.APIVersion+"/"+t.Kind] = t
	}
	seen := map[string]bool{}
	for _, o := range d.declaration.Observes {
		switch {
		case o.As == "":
			return fmt.Errorf("observes %s: needs as, its name in the templates", o.Kind)
		case seen[o.As]:
			return fmt.Errorf("observes: two lists named %q", o.As)
		case (o.MatchLabelsFrom == "") == !o.OwnedByParent:
			return fmt.Errorf("observes %s: needs one of matchLabelsFrom and ownedByParent", o.As)
		}
		seen[o.As] = true
	}
	return nil
}

// Declaration returns the decorator's declaration.
func (d *Decorator) Declaration() DecoratorDeclaration { return d.declaration }

// Name is the decorator's folder name.
func (d *Decorator) Name() string { return d.name }

// Decorates reports whether the decorator applies to parent (its type is
// the caller's business: it watches only that type).
func (d *Decorator) Decorates(parent metav1.Object) bool {
	return d.selector.Matches(labels.Set(parent.GetLabels()))
}

// ObservedSelector is the label selector of the objects o observes for
// parent: those that carry every label at o.MatchLabelsFrom. A parent
// without such labels observes nothing (nil, not everything).
func ObservedSelector(o Observed, parent *unstructured.Unstructured) (labels.Selector, error) {
	want, found, err := unstructured.NestedStringMap(parent.Object, strings.Split(o.MatchLabelsFrom, ".")...)
	if err != nil {
		return nil, fmt.Errorf("%s of %s: %w", o.MatchLabelsFrom, parent.GetName(), err)
	}
	if !found || len(want) == 0 {
		return nil, nil
	}
	return labels.SelectorFromSet(want), nil
}

// Render renders the decorator for parent with its observed objects. It
// returns what the templates set on the parent (nil when they do not
// render it): an object with the parent's apiVersion, kind, name and
// namespace and nothing but metadata.labels and metadata.annotations (less
// the keys that steer stencil, see stripControlKeys); and the children,
// stamped as any kind's objects, owned by the parent.
func (d *Decorator) Render(parent *unstructured.Unstructured, observed map[string][]*unstructured.Unstructured) (*unstructured.Unstructured, []*unstructured.Unstructured, error) {
	data := DecoratorData{Object: parent.Object, Observed: map[string][]map[string]any{}}
	for _, o := range d.declaration.Observes {
		list := []map[string]any{}
		for _, obj := range observed[o.As] {
			list = append(list, obj.Object)
		}
		data.Observed[o.As] = list
	}
	var patch *unstructured.Unstructured
	var children []*unstructured.Unstructured
	own := owner{gvk: parent.GroupVersionKind(), namespace: parent.GetNamespace(), name: parent.GetName(), uid: parent.GetUID(), decorator: d.name}
	run, err := d.runs.get(d.limits, d.limits.Bytes, "rendered bytes")
	if err != nil {
		return nil, nil, err
	}
	defer d.runs.put(run)
	for _, file := range d.manifests {
		out, err := run.execute(file, data)
		if err != nil {
			return nil, nil, &Error{File: file, Err: err}
		}
		docs, err := decode(out, run.within(d.limits, len(children)))
		if err != nil {
			return nil, nil, &Error{File: file, Err: err}
		}
		for _, o := range docs {
			if isParent(o, parent) {
				if patch != nil {
					return nil, nil, &Error{File: file, Err: fmt.Errorf("the parent %s is rendered twice", objectID(o))}
				}
				if err := checkPatch(o); err != nil {
					return nil, nil, &Error{File: file, Err: err}
				}
				// No key that steers stencil on the parent (it would tie
				// the parent to a resource, or move a resource to another
				// shard): stripped, as from the children.
				stripMetadataKeys(o.Object)
				patch = o
				continue
			}
			if err := d.checkChild(o, parent); err != nil {
				return nil, nil, &Error{File: file, Err: err}
			}
			setSource(o, file)
			children = append(children, o)
		}
	}
	if len(children) > d.limits.Objects {
		return nil, nil, &Error{File: "(all templates)", Err: &LimitError{Limit: "rendered objects", Max: strconv.Itoa(d.limits.Objects)}}
	}
	seen := map[string]bool{}
	for _, c := range children {
		id := objectID(c)
		if seen[id] {
			return nil, nil, &Error{File: c.GetAnnotations()[sourceAnnotation], Err: fmt.Errorf("%s is rendered twice", id)}
		}
		seen[id] = true
		if err := stamp(c, own); err != nil {
			return nil, nil, err
		}
	}
	slices.SortFunc(children, func(a, b *unstructured.Unstructured) int { return strings.Compare(objectID(a), objectID(b)) })
	return patch, children, nil
}

// isParent: o is the parent itself (same type, name and namespace).
func isParent(o, parent *unstructured.Unstructured) bool {
	return o.GroupVersionKind() == parent.GroupVersionKind() && o.GetName() == parent.GetName() && o.GetNamespace() == parent.GetNamespace()
}

// checkPatch: what a decorator sets on its parent is labels and annotations,
// nothing else (the parent's owner holds the rest).
func checkPatch(o *unstructured.Unstructured) error {
	for field, value := range o.Object {
		switch field {
		case "apiVersion", "kind":
		case "metadata":
			meta, _ := value.(map[string]any)
			for m := range meta {
				if m != "name" && m != "namespace" && m != "labels" && m != "annotations" {
					return fmt.Errorf("the parent %s sets metadata.%s: a decorator sets only labels and annotations on it", objectID(o), m)
				}
			}
		default:
			return fmt.Errorf("the parent %s sets %s: a decorator sets only labels and annotations on it", objectID(o), field)
		}
	}
	return stringMaps(o)
}

// stringMaps: o's labels and annotations are maps of strings (a number
// needs quote: unstructured would drop the whole map otherwise).
func stringMaps(o *unstructured.Unstructured) error {
	for _, field := range []string{"labels", "annotations"} {
		if v, found, _ := unstructured.NestedFieldNoCopy(o.Object, "metadata", field); !found || v == nil {
			continue // none, or an empty block
		}
		if _, _, err := unstructured.NestedStringMap(o.Object, "metadata", field); err != nil {
			return fmt.Errorf("%s: metadata.%s: every value must be a string (use quote): %w", objectID(o), field, err)
		}
	}
	return nil
}

// ChildNamespace is where a parent's children and observed objects are: its
// namespace, or, for a Namespace, that namespace itself.
func ChildNamespace(parent *unstructured.Unstructured) string {
	if parent.GetAPIVersion() == "v1" && parent.GetKind() == "Namespace" {
		return parent.GetName()
	}
	return parent.GetNamespace()
}

// checkChild: a child is of a declared type, in the parent's namespace (or,
// for a Namespace parent, in that namespace), and is not stencil's business
// to place elsewhere.
func (d *Decorator) checkChild(o, parent *unstructured.Unstructured) error {
	if err := stringMaps(o); err != nil {
		return err
	}
	if _, ok := o.GetAnnotations()[v1alpha1.AnnotationPrune]; ok {
		return fmt.Errorf("%s: annotation %s: a decorator's child is owned by its parent and goes with it", objectID(o), v1alpha1.AnnotationPrune)
	}
	t, ok := d.owns[o.GetAPIVersion()+"/"+o.GetKind()]
	if !ok {
		return fmt.Errorf("%s is not of a type %s declares in owns", objectID(o), decoratorFile)
	}
	if t.ClusterScoped {
		return fmt.Errorf("%s: a decorator's children are namespaced (a cluster-scoped child would outlive no owner stencil watches)", objectID(o))
	}
	ns := ChildNamespace(parent)
	switch o.GetNamespace() {
	case "":
		o.SetNamespace(ns)
	case ns:
	default:
		return fmt.Errorf("%s is not in namespace %s, the parent's", objectID(o), ns)
	}
	return nil
}
