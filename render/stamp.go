package render

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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

// check enforces the kind's rules on one rendered object: a declared type, a
// valid name, and the custom resource's namespace for namespaced types (set
// when the template leaves it empty).
func (k *Kind) check(o *unstructured.Unstructured, own owner) error {
	gvk := o.GroupVersionKind()
	ref, declared := k.owns[gvk]
	if !declared {
		return fmt.Errorf("%s %q: type %s is not declared in %s; add it under owns", gvk.Kind, o.GetName(), gvk, declarationFile)
	}
	if errs := validation.IsDNS1123Subdomain(o.GetName()); len(errs) > 0 {
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
	case !ref.ClusterScoped && ns != own.namespace:
		return fmt.Errorf("%s %q: namespace %q is not the custom resource's namespace %q", gvk.Kind, o.GetName(), ns, own.namespace)
	}
	return nil
}

// stamp adds stencil's labels and annotations, a controller ownerReference
// for namespaced objects (unless the template keeps them, see
// v1alpha1.AnnotationPrune), and, last, the hash of the result.
func stamp(o *unstructured.Unstructured, own owner) error {
	labels := o.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[v1alpha1.LabelManagedBy] = v1alpha1.ManagedByStencil
	labels[v1alpha1.LabelOwnerUID] = string(own.uid)
	if own.shard != "" {
		labels[v1alpha1.LabelShard] = own.shard
	}
	o.SetLabels(labels)

	ann := maps.Clone(o.GetAnnotations())
	delete(ann, sourceAnnotation)
	delete(ann, v1alpha1.AnnotationDesiredHash)
	ann[v1alpha1.AnnotationOwner] = v1alpha1.OwnerAnnotation(own.gvk, own.namespace, own.name)
	o.SetAnnotations(ann)

	// A kept object (prune disabled) gets no ownerReference: the garbage
	// collector would delete it with the custom resource.
	if o.GetNamespace() != "" && ann[v1alpha1.AnnotationPrune] != v1alpha1.PruneDisabled {
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
