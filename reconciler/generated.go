package reconciler

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/render"
)

// The values a chart kind's templates generate (randAlphaNum, genCA, now,
// ...) are made at the first render that calls them and kept in a Secret
// beside the resource, which every later render reads: the same password
// or certificate after a restart, on another replica, after a value
// change or an upgrade. stencil writes the Secret before it applies what
// the render made of it, never logs its data, and never puts it in
// status; the resource's ownerReference lets the garbage collector delete
// it with the resource.

// LabelGeneratedFor marks the Secret that keeps a resource's generated
// values; its value is the resource's UID.
const LabelGeneratedFor = "stencil.dev/generated-for"

// GeneratedSecretName is the name of the Secret, in the resource's
// namespace, that keeps the generated values of the resource of UID uid.
func GeneratedSecretName(uid types.UID) string { return "stencil-generated-" + string(uid) }

// kept is a resource's generated values as its Secret holds them, and the
// Secret's resourceVersion ("": there is none yet).
type kept struct {
	data            map[string][]byte
	resourceVersion string
}

// generatedError is a failed read or write of the generated values'
// Secret.
type generatedError struct{ err error }

func (e *generatedError) Error() string { return e.err.Error() }
func (e *generatedError) Unwrap() error { return e.err }

// ReadGenerated returns the values kept for cr, a live resource of k, for
// a render that reads them and keeps nothing (stencil diff); nil when k
// generates none or cr is not live (no UID).
func ReadGenerated(ctx context.Context, c client.Reader, k *render.Kind, cr v1alpha1.Object) (*render.Generated, error) {
	if !k.Generates() || cr.GetUID() == "" {
		return nil, nil
	}
	kept, err := readKept(ctx, c, cr)
	if err != nil {
		return nil, err
	}
	return render.NewGenerated(kept.data), nil
}

// readKept reads cr's Secret of generated values. A Secret of that name
// that is not the one stencil made for cr is an error: stencil never
// reads values from, nor writes, an object that is not its own.
func readKept(ctx context.Context, c client.Reader, cr v1alpha1.Object) (kept, error) {
	name := GeneratedSecretName(cr.GetUID())
	s := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: cr.GetNamespace(), Name: name}, s)
	if apierrors.IsNotFound(err) {
		return kept{}, nil
	}
	if err != nil {
		return kept{}, &generatedError{fmt.Errorf("reading the Secret %s: %w", name, err)}
	}
	if s.Labels[LabelGeneratedFor] != string(cr.GetUID()) || !ownedBy(s.OwnerReferences, cr.GetUID()) {
		return kept{}, &generatedError{fmt.Errorf("the Secret %s is not the one stencil keeps this resource's generated values in: its label %s and ownerReference do not name the resource. stencil leaves it as it is; delete it to let stencil make its own", name, LabelGeneratedFor)}
	}
	return kept{data: s.Data, resourceVersion: s.ResourceVersion}, nil
}

func ownedBy(refs []metav1.OwnerReference, uid types.UID) bool {
	for _, ref := range refs {
		if ref.UID == uid {
			return true
		}
	}
	return false
}

// generatedFor returns cr's generated values, for a render that adds to
// them; nil when the kind generates none. This process remembers them
// from its last read or write.
func (r *Reconciler) generatedFor(ctx context.Context, cr v1alpha1.Object) (*render.Generated, error) {
	if !r.kind().Generates() {
		return nil, nil
	}
	k, ok := r.generated.Load(cr.GetUID())
	if !ok {
		var err error
		if k, err = readKept(ctx, r.reader, cr); err != nil {
			return nil, err
		}
		r.generated.Store(cr.GetUID(), k)
	}
	return render.NewGenerated(k.data), nil
}

// keepGenerated writes what a render of cr generated to its Secret, when
// it differs from what the Secret holds: before anything the render made
// is applied. complete: the render ran every template (a graph's waiting
// nodes did not run, and keep what they made before).
func (r *Reconciler) keepGenerated(ctx context.Context, cr v1alpha1.Object, gen *render.Generated, complete bool) error {
	if gen == nil {
		return nil
	}
	data, changed := gen.Keep(complete)
	if !changed {
		return nil
	}
	if err := r.writable(); err != nil {
		return &generatedError{err}
	}
	uid := cr.GetUID()
	before, _ := r.generated.Load(uid)
	gvk := r.kind().OwnerGroupVersionKind()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: GeneratedSecretName(uid), Namespace: cr.GetNamespace(), ResourceVersion: before.resourceVersion,
			Labels: map[string]string{LabelGeneratedFor: string(uid)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind,
				Name: cr.GetName(), UID: uid, BlockOwnerDeletion: new(true)}},
		},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}
	var err error
	if before.resourceVersion == "" {
		err = r.client.Create(ctx, s)
	} else {
		err = r.client.Update(ctx, s)
	}
	if err != nil {
		// Another writer (a replica before this one, a person): read it
		// again at the retry.
		r.generated.Delete(uid)
		return &generatedError{fmt.Errorf("writing the Secret %s: %w", s.Name, err)}
	}
	r.generated.Store(uid, kept{data: data, resourceVersion: s.ResourceVersion})
	return nil
}

func isGeneratedError(err error) bool {
	_, ok := errors.AsType[*generatedError](err)
	return ok
}
