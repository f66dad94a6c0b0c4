package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// This file is what follows an apply the API server refused: an object it
// rejects is reported, and one whose immutable fields the render changes
// is recreated when its template allows it.

// refusedApply handles an apply of d that failed with err: an immutable
// field recreates d when its template allows it; an object the API server
// rejected as invalid is reported, and the others applied still. Any other
// error stops the apply.
func (a *Applier) refusedApply(ctx context.Context, d *unstructured.Unstructured, err error, out *ApplyOutcome) error {
	if fields := immutableFields(err); len(fields) > 0 {
		return a.recreate(ctx, d, fields, err, out)
	}
	if rejected(err) {
		c := out.of(d)
		c.Action, c.Err = Refused, err
		return nil
	}
	return err
}

// rejected: the API server refused the object itself as invalid (422) or
// too large (413): the same render is refused again, whatever the retry.
// Not an address already allocated (a Service's node port or cluster IP,
// which another object may give up), nor a webhook's denial (its own
// rules, which may change): those are retried as any failure.
func rejected(err error) bool {
	if err == nil {
		return false
	}
	if apierrors.IsRequestEntityTooLargeError(err) {
		return true
	}
	msg := err.Error()
	return apierrors.IsInvalid(err) && !strings.Contains(msg, "already allocated") && !strings.Contains(msg, "admission webhook")
}

// immutableFields are the fields that err, an apply's error, says cannot
// change: the API server answers 422 Invalid with one cause per field,
// whose message says so in one of the API's wordings (immutableWordings).
// None for any other error.
func immutableFields(err error) []string {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return nil
	}
	// Every cause must be one: an object deleted to be recreated must not
	// then fail to be created for another reason.
	var fields []string
	for _, c := range status.Status().Details.Causes {
		if !slices.ContainsFunc(immutableWordings, func(w string) bool { return strings.Contains(c.Message, w) }) {
			return nil
		}
		fields = append(fields, c.Field)
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
	// holdsData: its template allows recreating it, but not losing the
	// data it holds.
	holdsData bool
}

func (e immutableError) Error() string {
	d := e.object
	gvk := d.GroupVersionKind()
	del := "kubectl delete " + kubectlObject(d)
	msg := gvk.Kind + " " + quoted(d.GetNamespace(), d.GetName()) + ": the new render changes " + strings.Join(e.fields, ", ") +
		", which the API server does not let change once set. stencil leaves the object as it is"
	if CreateOnly(d) {
		return msg + ": its template makes it once and never again (create-only), so stencil never recreates it. Change the spec or template back, or delete it yourself (" + del + "), and stencil creates it anew, with new values"
	}
	if e.holdsData {
		return msg + ": it holds data, which recreating it would lose. Change the spec or template back, set " + v1alpha1.AnnotationForce + ": " + v1alpha1.ForceEnabledDataLoss +
			" in its template to allow that, or delete it yourself (" + del + ")"
	}
	return msg + ". Change the spec or template back, let stencil recreate it (" + v1alpha1.AnnotationForce + ": " + v1alpha1.ForceEnabled +
		" in its template), or delete it and stencil creates it anew (" + del + ")"
}

func (e immutableError) Unwrap() error { return e.err }

// recreate handles an apply of d that the API server refused because it
// changes the immutable fields: when d's template allows it (and the object
// holds no data, or the template allows losing it), it deletes the object,
// which the next reconcile creates anew from d; else it records the
// refusal. Whether the object holds data is decided on the live object,
// read from the API server: the delete happens under its settings (a
// StatefulSet's claim retention policy), not under d's, which the refused
// apply did not write. Only an error of the read or the delete is returned.
func (a *Applier) recreate(ctx context.Context, d *unstructured.Unstructured, fields []string, refused error, out *ApplyOutcome) error {
	immutable := immutableError{object: d, fields: fields, err: refused}
	force := d.GetAnnotations()[v1alpha1.AnnotationForce]
	// A create-only object holds a value made once (a generated password):
	// it is never deleted to be made anew, whatever the template asks.
	if CreateOnly(d) || force != v1alpha1.ForceEnabled && force != v1alpha1.ForceEnabledDataLoss {
		c := out.of(d)
		c.Action, c.Err = Refused, immutable
		return nil
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(d.GroupVersionKind())
	if err := a.reader.Get(ctx, client.ObjectKeyFromObject(d), live); err != nil {
		return fmt.Errorf("reading %s %s to recreate it: %w", d.GetKind(), client.ObjectKeyFromObject(d), err)
	}
	// d's data counts too: a template that says its data goes with the
	// object needs enabled-data-loss to recreate it, whatever the live
	// object says.
	data := holdsData(live) || holdsData(d)
	if !data && force != v1alpha1.ForceEnabledDataLoss {
		claims, err := a.controlsClaims(ctx, live)
		if err != nil {
			return err
		}
		data = claims
	}
	switch {
	case data && force != v1alpha1.ForceEnabledDataLoss:
		immutable.holdsData = true
		c := out.of(d)
		c.Action, c.Err = Refused, immutable
		return nil
	case !ownedFor(live, d): // being adopted: a person's object is never deleted
		c := out.of(d)
		c.Action, c.Err = Refused, immutable
		return nil
	}
	// The preconditions make the delete apply to the object just checked:
	// a change in between (its retention policy set to Delete) fails it
	// with a conflict, and the next reconcile decides again.
	uid, rv := live.GetUID(), live.GetResourceVersion()
	err := writer(ctx, a.client).Delete(ctx, live, client.Preconditions{UID: &uid, ResourceVersion: &rv}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if apierrors.IsConflict(err) {
		return fmt.Errorf("deleting %s %s to recreate it: %w: %w", d.GetKind(), client.ObjectKeyFromObject(d), ErrChangedWhileRead, err)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s %s to recreate it: %w", d.GetKind(), client.ObjectKeyFromObject(d), err)
	}
	c := out.of(d)
	c.Action, c.Err = Recreated, immutable
	return nil
}

// controlsClaims reports whether live, a StatefulSet, is still the
// controller of claims in its namespace: the garbage collector deletes
// those with it, whatever its retention policy says now (the StatefulSet
// controller takes its ownerReferences off the claims some time after the
// policy turns to Retain).
func (a *Applier) controlsClaims(ctx context.Context, live *unstructured.Unstructured) (bool, error) {
	if live.GroupVersionKind().GroupKind().String() != "StatefulSet.apps" {
		return false, nil
	}
	claims := &metav1.PartialObjectMetadataList{}
	claims.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaimList"))
	err := a.reader.List(ctx, claims, client.InNamespace(live.GetNamespace()))
	if apierrors.IsForbidden(err) {
		return true, nil // stencil cannot tell: its claims are taken as held
	}
	if err != nil {
		return false, fmt.Errorf("listing the claims of StatefulSet %s: %w", client.ObjectKeyFromObject(live), err)
	}
	for _, c := range claims.Items {
		if ref := metav1.GetControllerOfNoCopy(&c); ref != nil && ref.UID == live.GetUID() {
			return true, nil
		}
	}
	return false, nil
}

// holdsData: deleting o loses data: a volume or its claim, a Namespace (all
// in it), a CustomResourceDefinition (all its custom resources), a
// StatefulSet that deletes its claims with it (whenDeleted: Delete; the API
// server sets Retain when it is absent).
func holdsData(o *unstructured.Unstructured) bool {
	gvk := o.GroupVersionKind()
	switch gvk.GroupKind().String() {
	case "PersistentVolumeClaim", "PersistentVolume", "Namespace", "CustomResourceDefinition.apiextensions.k8s.io":
		return true
	case "StatefulSet.apps":
		policy, _, _ := unstructured.NestedString(o.Object, "spec", "persistentVolumeClaimRetentionPolicy", "whenDeleted")
		return policy == "Delete"
	}
	return false
}
