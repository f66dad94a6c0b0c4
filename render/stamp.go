package render

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// owner is the custom resource being rendered.
type owner struct {
	gvk       schema.GroupVersionKind
	namespace string
	name      string
	uid       types.UID
	// shard is the resource's shard label, copied to its objects so that
	// each shard caches only its own resources' objects.
	shard string
	// decorator names the decorator that renders the objects, if one does
	// (their label [v1alpha1.LabelDecorator]).
	decorator string
}

func newOwner(gvk schema.GroupVersionKind, obj v1alpha1.Object) owner {
	return owner{gvk: gvk, namespace: obj.GetNamespace(), name: obj.GetName(), uid: obj.GetUID(), shard: obj.GetLabels()[v1alpha1.LabelShard]}
}

// checkHandOver checks the value of [v1alpha1.AnnotationHandOver]: dotted
// paths of map keys, comma-separated, never into metadata (which carries
// stencil's own stamp) or apiVersion and kind.
func checkHandOver(value string) error {
	if value == "" {
		return nil
	}
	for spec := range strings.SplitSeq(value, ",") {
		spec = strings.TrimSpace(spec)
		names := strings.Split(spec, ".")
		if slices.Contains(names, "") || strings.ContainsAny(spec, "[]=\" ") {
			return fmt.Errorf("%q is not a dotted path of map keys, such as spec.replicas", spec)
		}
		switch names[0] {
		case "metadata", "apiVersion", "kind":
			return fmt.Errorf("%q: stencil never hands over %s", spec, names[0])
		}
	}
	return nil
}

// NamespaceError is a rendered object in a namespace that is neither the
// custom resource's nor one its kind declares.
type NamespaceError struct {
	Kind, Name, Namespace string
	// Own is the custom resource's namespace.
	Own string
}

func (e *NamespaceError) Error() string {
	return fmt.Sprintf("%s %q: namespace %q is not the custom resource's namespace %q, nor one %s declares under namespaces", e.Kind, e.Name, e.Namespace, e.Own, declarationFile)
}

// check enforces the kind's rules on one rendered object: a declared type, a
// valid name, and the custom resource's namespace for namespaced types (set
// when the template leaves it empty).
func (k *Kind) check(o *unstructured.Unstructured, own owner) error {
	gvk := o.GroupVersionKind()
	ref, declared := k.owns[gvk]
	if !declared {
		return &UndeclaredTypeError{GroupVersionKind: gvk, Name: o.GetName()}
	}
	if err := k.checkServed(gvk, o.GetName()); err != nil {
		return err
	}
	if errs := validName(gvk, o.GetName()); len(errs) > 0 {
		return fmt.Errorf("%s %q: invalid name: %s", gvk.Kind, o.GetName(), strings.Join(errs, "; "))
	}
	if err := checkHandOver(o.GetAnnotations()[v1alpha1.AnnotationHandOver]); err != nil {
		return fmt.Errorf("%s %q: annotation %s: %w", gvk.Kind, o.GetName(), v1alpha1.AnnotationHandOver, err)
	}
	switch ns := o.GetNamespace(); {
	case ref.ClusterScoped && ns != "":
		return fmt.Errorf("%s %q: cluster-scoped type has namespace %q", gvk.Kind, o.GetName(), ns)
	case !ref.ClusterScoped && ns == "":
		o.SetNamespace(own.namespace)
	case !ref.ClusterScoped && ns != own.namespace && !slices.Contains(k.declaration.Namespaces, ns):
		return &NamespaceError{Kind: gvk.Kind, Name: o.GetName(), Namespace: ns, Own: own.namespace}
	}
	return nil
}

// stamp removes the control keys the template wrote (see
// stripControlKeys), then adds stencil's labels and annotations, a
// controller ownerReference for namespaced objects (unless the template
// keeps them, see v1alpha1.AnnotationPrune), and, last, the hash of the
// result.
func stamp(o *unstructured.Unstructured, own owner) error {
	stripControlKeys(o, own)
	labels := o.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[v1alpha1.LabelManagedBy] = v1alpha1.ManagedByStencil
	maps.Copy(labels, own.controlLabels())
	o.SetLabels(labels)

	ann := maps.Clone(o.GetAnnotations())
	delete(ann, sourceAnnotation)
	delete(ann, v1alpha1.AnnotationDesiredHash)
	ann[v1alpha1.AnnotationOwner] = v1alpha1.OwnerAnnotation(own.gvk, own.namespace, own.name)
	o.SetAnnotations(ann)

	// A kept object (prune disabled) gets no ownerReference: the garbage
	// collector would delete it with the custom resource.
	// Nor does one in another namespace than its namespaced owner's
	// (declared in _kind.yaml): no ownerReference crosses namespaces. A
	// cluster-scoped owner (a decorated Namespace) owns its children
	// wherever they are.
	sameNamespace := own.namespace == "" || o.GetNamespace() == own.namespace
	if o.GetNamespace() != "" && sameNamespace && ann[v1alpha1.AnnotationPrune] != v1alpha1.PruneDisabled {
		o.SetOwnerReferences([]metav1.OwnerReference{{
			APIVersion:         own.gvk.GroupVersion().String(),
			Kind:               own.gvk.Kind,
			Name:               own.name,
			UID:                own.uid,
			Controller:         new(true),
			BlockOwnerDeletion: new(true),
		}})
	}
	hash, err := Hash(o)
	if err != nil {
		return err
	}
	ann[v1alpha1.AnnotationDesiredHash] = hash
	o.SetAnnotations(ann)
	return nil
}

// controlLabels are the labels that steer stencil, as stencil's admission
// policy (config/policy) lists them: they tie an object to a resource (its
// cache selects by them, its events wake that resource) or pick the
// stencil process that reconciles a resource.
var controlLabels = []string{v1alpha1.LabelOwnerUID, v1alpha1.LabelDecorator, v1alpha1.LabelShard, v1alpha1.LabelClaim}

// controlAnnotations are the annotations that steer stencil, as its
// admission policy lists them.
var controlAnnotations = []string{v1alpha1.AnnotationOwner, v1alpha1.AnnotationPrunePending, v1alpha1.AnnotationClaimLease, v1alpha1.AnnotationOrphaning, v1alpha1.AnnotationConversionFailed}

// controlLabels are the control labels, with their values, that stencil
// puts on the objects it renders for own.
func (own owner) controlLabels() map[string]string {
	labels := map[string]string{v1alpha1.LabelOwnerUID: string(own.uid)}
	if own.shard != "" {
		labels[v1alpha1.LabelShard] = own.shard
	}
	if own.decorator != "" {
		labels[v1alpha1.LabelDecorator] = own.decorator
	}
	return labels
}

// stripControlKeys removes from o the control keys (the keys that steer
// stencil) its template wrote: every control label and annotation of its metadata
// (stamp then sets stencil's own), and every control label of the label
// maps that the cluster's controllers copy into the objects they create
// (see copiedLabels), but the owner UID label with own's UID, which
// ownerLabels gives a pod template. Otherwise a template, or a tenant whose
// spec it copies into labels, could tie a Pod or a claim to another
// resource, or move a resource to another shard: stencil's writes, also
// those it makes as a tenant's ServiceAccount, pass stencil's admission
// policy. Stripped, not refused: a template that copies the resource's own
// labels keeps rendering when sharding labels the resource.
func stripControlKeys(o *unstructured.Unstructured, own owner) {
	stripMetadataKeys(o.Object)
	for _, labels := range copiedLabels(o.Object) {
		for _, key := range controlLabels {
			if value, _ := labels[key].(string); key != v1alpha1.LabelOwnerUID || value != string(own.uid) {
				delete(labels, key)
			}
		}
	}
}

// stripMetadataKeys removes the control labels and annotations from obj's
// metadata.
func stripMetadataKeys(obj map[string]any) {
	meta := nested(obj, "metadata")
	for _, key := range controlLabels {
		delete(nested(meta, "labels"), key)
	}
	for _, key := range controlAnnotations {
		delete(nested(meta, "annotations"), key)
	}
}

// copiedTemplates are the paths of the object templates whose labels the
// cluster's controllers copy into the objects they create: a workload's pod
// template, a CronJob's job template and its pod template.
var copiedTemplates = []string{"spec.template", "spec.jobTemplate", "spec.jobTemplate.spec.template"}

// podSpecs are the paths of the pod specs whose ephemeral volumes' claim
// templates the cluster's controllers make claims of: a pod's, a pod
// template's, a CronJob's pod template's.
var podSpecs = []string{"spec", "spec.template.spec", "spec.jobTemplate.spec.template.spec"}

// copiedLabels are the label maps of obj that the cluster's controllers
// copy into the objects they create, as stencil's admission policy checks
// them: those of copiedTemplates, of a StatefulSet's volumeClaimTemplates,
// and of the claim templates of the ephemeral volumes of podSpecs.
func copiedLabels(obj map[string]any) []map[string]any {
	var found []map[string]any
	add := func(template map[string]any) {
		if labels, ok := nested(template, "metadata")["labels"].(map[string]any); ok {
			found = append(found, labels)
		}
	}
	for _, path := range copiedTemplates {
		add(nested(obj, strings.Split(path, ".")...))
	}
	for _, claim := range items(nested(obj, "spec")["volumeClaimTemplates"]) {
		add(claim)
	}
	for _, path := range podSpecs {
		for _, volume := range items(nested(obj, strings.Split(path, ".")...)["volumes"]) {
			add(nested(volume, "ephemeral", "volumeClaimTemplate"))
		}
	}
	return found
}

// nested is the map at path in m, or nil.
func nested(m map[string]any, path ...string) map[string]any {
	for _, field := range path {
		m, _ = m[field].(map[string]any)
	}
	return m
}

// items are the elements of list, a []any, as maps (nil for those that are
// not maps).
func items(list any) []map[string]any {
	elems, _ := list.([]any)
	out := make([]map[string]any, len(elems))
	for i, e := range elems {
		out[i], _ = e.(map[string]any)
	}
	return out
}

// Hash is the hash of an object's content without its hash annotation.
func Hash(o *unstructured.Unstructured) (string, error) {
	if _, found, _ := unstructured.NestedFieldNoCopy(o.Object, "metadata", "annotations", v1alpha1.AnnotationDesiredHash); found {
		c := o.DeepCopy() // rare: a render never carries the annotation yet
		ann := c.GetAnnotations()
		delete(ann, v1alpha1.AnnotationDesiredHash)
		if len(ann) == 0 {
			ann = nil // as if it never had annotations
		}
		c.SetAnnotations(ann)
		o = c
	}
	js, err := o.MarshalJSON()
	if err != nil {
		return "", fmt.Errorf("hashing %s %q: %w", o.GetKind(), o.GetName(), err)
	}
	sum := sha256.Sum256(js)
	return hex.EncodeToString(sum[:16]), nil
}

// UndeclaredTypeError is a rendered object of a type that _kind.yaml does
// not declare.
type UndeclaredTypeError struct {
	GroupVersionKind schema.GroupVersionKind
	Name             string
}

func (e *UndeclaredTypeError) Error() string {
	return fmt.Sprintf("%s %q: type %s is not declared in %s; add it under owns", e.GroupVersionKind.Kind, e.Name, e.GroupVersionKind, declarationFile)
}

// validName checks a name as the API server does for its type: RBAC's
// types take any path segment (system:metrics-reader), others a DNS
// subdomain.
func validName(gvk schema.GroupVersionKind, name string) []string {
	if gvk.Group == "rbac.authorization.k8s.io" {
		return content.IsPathSegmentName(name)
	}
	return validation.IsDNS1123Subdomain(name)
}
