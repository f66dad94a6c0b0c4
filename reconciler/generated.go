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
	s, err := readKept(ctx, c, cr)
	if err != nil {
		return nil, err
	}
	return render.NewGenerated(s.Data), nil
}

// readKept reads cr's Secret of generated values (one with no name when
// there is none yet). A Secret of that name that is not the one stencil
// made for cr is an error: stencil never reads values from, nor writes,
// an object that is not its own.
func readKept(ctx context.Context, c client.Reader, cr v1alpha1.Object) (*corev1.Secret, error) {
	name := GeneratedSecretName(cr.GetUID())
	s := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: cr.GetNamespace(), Name: name}, s)
	if apierrors.IsNotFound(err) {
		return &corev1.Secret{}, nil
	}
	if err != nil {
		return nil, &generatedError{fmt.Errorf("reading the Secret %s: %w", name, err)}
	}
	if s.Labels[LabelGeneratedFor] != string(cr.GetUID()) || !ownedBy(s.OwnerReferences, cr.GetUID()) {
		return nil, &generatedError{fmt.Errorf("the Secret %s is not the one stencil keeps this resource's generated values in: its label %s and ownerReference do not name the resource. stencil leaves it as it is; delete it to let stencil make its own", name, LabelGeneratedFor)}
	}
	return s, nil
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
// them, and the Secret they were read from; nil when the kind generates
// none. They are read from the API server at every render: a Secret
// deleted (to make the values again) or edited is seen at the next one.
func (r *Reconciler) generatedFor(ctx context.Context, cr v1alpha1.Object) (*render.Generated, *corev1.Secret, error) {
	if !r.kind().Generates() {
		return nil, nil, nil
	}
	s, err := readKept(ctx, r.reader, cr)
	if err != nil {
		return nil, nil, err
	}
	return render.NewGenerated(s.Data), s, nil
}

// keepGenerated writes what a render of cr generated into its Secret
// (read as from), when it differs from what the Secret holds: before
// anything the render made is applied. The Secret's other fields (another
// writer's labels or finalizers) are kept.
func (r *Reconciler) keepGenerated(ctx context.Context, cr v1alpha1.Object, gen *render.Generated, from *corev1.Secret) error {
	if gen == nil {
		return nil
	}
	data, changed := gen.Keep()
	if !changed {
		return nil
	}
	if err := r.writable(); err != nil {
		return &generatedError{err}
	}
	s := from.DeepCopy()
	s.Data = data
	var err error
	if s.Name == "" {
		uid := cr.GetUID()
		gvk := r.kind().OwnerGroupVersionKind()
		s.ObjectMeta = metav1.ObjectMeta{
			Name: GeneratedSecretName(uid), Namespace: cr.GetNamespace(),
			Labels: map[string]string{LabelGeneratedFor: string(uid)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind,
				Name: cr.GetName(), UID: uid, BlockOwnerDeletion: new(true)}},
		}
		s.Type = corev1.SecretTypeOpaque
		err = r.client.Create(ctx, s)
	} else {
		// At the version read: a conflict (another writer) is retried.
		err = r.client.Update(ctx, s)
	}
	if err != nil {
		return &generatedError{fmt.Errorf("writing the Secret %s: %w", s.Name, err)}
	}
	return nil
}

func isGeneratedError(err error) bool {
	_, ok := errors.AsType[*generatedError](err)
	return ok
}
