package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// Ownership: stencil applies an object only for the custom resource it
// rendered it for. An object is that resource's when it carries the
// resource's owner UID label, or a controller ownerReference to it, or
// (cluster-scoped, where no ownerReference is possible) its owner
// annotation. Any other object under a rendered name is left untouched and
// reported as a conflict, unless a person annotated it with
// v1alpha1.AnnotationAdopt naming the resource.

// Conflict is a rendered object that exists and is not this resource's.
type Conflict struct {
	// ID is the object's identity.
	ID ObjectID
	// object names it, as in `ConfigMap "shared"`.
	object string
	// holder says whose it is, as in "it belongs to Widget ns/other".
	holder string
	// adopt is the kubectl command that lets this resource take it over;
	// empty when another controller holds it and stencil never will.
	adopt string
	// predecessor: the object belongs to a deleted resource of the same
	// kind and name, and the garbage collector is about to delete it.
	predecessor bool
	// deleting: the object is being deleted; finalizers names what it
	// waits for.
	deleting   bool
	finalizers []string
	// ours: the object is this resource's (being deleted).
	ours bool
}

func (c Conflict) Error() string {
	waits := ""
	if len(c.finalizers) > 0 {
		waits = " It waits for the finalizers " + strings.Join(c.finalizers, ", ") + "."
	}
	switch {
	case c.predecessor:
		return c.object + " still belongs to the deleted resource of the same name (" + c.holder + "); stencil creates it again once the garbage collector has deleted it." + waits
	case c.deleting && c.ours:
		return c.object + " is being deleted; stencil creates it anew once it is gone." + waits
	case c.deleting:
		return c.object + " is being deleted and is not this resource's (" + c.holder + "); stencil creates it once it is gone." + waits
	case c.adopt == "":
		return c.object + " exists and is not this resource's (" + c.holder + "); stencil leaves it untouched and cannot take it over while another controller holds it. Render another name"
	}
	return c.object + " exists and is not this resource's (" + c.holder + "); stencil leaves it untouched. Render another name, or let this resource take it over: " + c.adopt +
		" (stencil looks again within a minute, or at once when the resource changes)"
}

// ConflictsError joins the conflicts into one error, at most three named.
func ConflictsError(cs []Conflict) error {
	errs := make([]error, 0, 4)
	for _, c := range cs[:min(len(cs), 3)] {
		errs = append(errs, c)
	}
	if len(cs) > 3 {
		errs = append(errs, fmt.Errorf("and %d more objects", len(cs)-3))
	}
	return errors.Join(errs...)
}

// GoingAway says whether every conflicting object is on its way out (a
// deleted predecessor's, or being deleted): the conflict resolves itself,
// no one has to act.
func GoingAway(cs []Conflict) bool {
	for _, c := range cs {
		if !c.predecessor && !c.deleting {
			return false
		}
	}
	return true
}

// ownedFor reports whether live is the object that stencil rendered as d
// (d carries its resource's owner label and annotation). A controller
// ownerReference decides when there is one: it must point to the resource.
// Without one (cluster-scoped objects, or one whose reference someone
// removed) it takes two proofs, the owner UID label and the owner
// annotation: a label alone is easily copied, by a pod template for one.
func ownedFor(live metav1.Object, d *unstructured.Unstructured) bool {
	uid := d.GetLabels()[v1alpha1.LabelOwnerUID]
	if ref := metav1.GetControllerOf(live); ref != nil {
		return string(ref.UID) == uid
	}
	return live.GetLabels()[v1alpha1.LabelOwnerUID] == uid &&
		live.GetAnnotations()[v1alpha1.AnnotationOwner] == d.GetAnnotations()[v1alpha1.AnnotationOwner]
}

// adoptedBy reports whether a person asked, on live, that the resource d was
// rendered for take it over. An object that another controller holds is
// never taken over: its controller would fight for it.
func adoptedBy(live metav1.Object, d *unstructured.Unstructured) bool {
	want := d.GetAnnotations()[v1alpha1.AnnotationOwner]
	return want != "" && live.GetAnnotations()[v1alpha1.AnnotationAdopt] == want && metav1.GetControllerOf(live) == nil
}

// predecessorOf reports whether live was rendered for a resource of the
// same kind, namespace and name as d's that has been deleted (its UID
// differs), and is controlled by it: the garbage collector deletes it.
func predecessorOf(live metav1.Object, d *unstructured.Unstructured) bool {
	uid := live.GetLabels()[v1alpha1.LabelOwnerUID]
	owner := d.GetAnnotations()[v1alpha1.AnnotationOwner]
	ref := metav1.GetControllerOf(live)
	gk, _, ok := v1alpha1.ParseOwnerAnnotation(owner)
	return ok && uid != "" && uid != d.GetLabels()[v1alpha1.LabelOwnerUID] && live.GetAnnotations()[v1alpha1.AnnotationOwner] == owner &&
		ref != nil && string(ref.UID) == uid && ref.Kind == gk.Kind
}

// conflictWith describes live, which is in the way of d.
func conflictWith(d *unstructured.Unstructured, live metav1.Object) Conflict {
	gvk := d.GroupVersionKind()
	c := Conflict{ID: NewID(gvk, d.GetNamespace(), d.GetName()), object: gvk.Kind + " " + quoted(d.GetNamespace(), d.GetName()),
		holder: holderOf(live), predecessor: predecessorOf(live, d), deleting: live.GetDeletionTimestamp() != nil, ours: ownedFor(live, d)}
	if c.predecessor || c.deleting {
		c.finalizers = live.GetFinalizers()
	}
	if metav1.GetControllerOf(live) != nil || c.deleting {
		return c
	}
	c.adopt = "kubectl annotate " + kubectlObject(d) + " " + v1alpha1.AnnotationAdopt + "=" + d.GetAnnotations()[v1alpha1.AnnotationOwner]
	return c
}

// kubectlObject names d as kubectl arguments: "deployment.apps web -n ns".
func kubectlObject(d *unstructured.Unstructured) string {
	gvk := d.GroupVersionKind()
	object := strings.ToLower(gvk.Kind)
	if gvk.Group != "" {
		object += "." + gvk.Group
	}
	object += " " + d.GetName()
	if ns := d.GetNamespace(); ns != "" {
		object += " -n " + ns
	}
	return object
}

func quoted(namespace, name string) string {
	if namespace == "" {
		return fmt.Sprintf("%q", name)
	}
	return fmt.Sprintf("%q in namespace %q", name, namespace)
}

// holderOf says whose live is: the stencil resource it was rendered for
// (when its controller, if any, is that resource), its controller, or the
// managers that wrote it.
func holderOf(live metav1.Object) string {
	uid := live.GetLabels()[v1alpha1.LabelOwnerUID]
	ref := metav1.GetControllerOf(live)
	if gk, nn, ok := v1alpha1.ParseOwnerAnnotation(live.GetAnnotations()[v1alpha1.AnnotationOwner]); ok && uid != "" && (ref == nil || string(ref.UID) == uid) {
		return fmt.Sprintf("it belongs to %s %s, UID %s", gk.Kind, nn, uid)
	}
	if ref != nil {
		return fmt.Sprintf("it is controlled by %s %s", ref.Kind, ref.Name)
	}
	var managers []string
	for _, e := range live.GetManagedFields() {
		if !slices.Contains(managers, e.Manager) {
			managers = append(managers, e.Manager)
		}
	}
	if len(managers) == 0 {
		return "it was created outside stencil"
	}
	return "it is managed by " + strings.Join(managers[:min(len(managers), 3)], ", ")
}

// FirstApplies serialise the first apply of an object name among the
// resources of this process (every kind): while one resource creates it,
// another that renders the name reports the conflict at once, rather than
// have its create-first apply refused and read the object. (The API server
// cannot tell the two apart by manager: they share one field manager.)
type FirstApplies struct {
	mu   sync.Mutex
	byID map[ObjectID]string // object id → owner annotation of the resource creating it
}

// begin starts owner's first apply of id, unless another resource's is
// under way; then it returns that resource's owner annotation.
func (c *FirstApplies) begin(id ObjectID, owner string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if creator, ok := c.byID[id]; ok && creator != owner {
		return creator, false
	}
	if c.byID == nil {
		c.byID = map[ObjectID]string{}
	}
	c.byID[id] = owner
	return owner, true
}

// end ends the first apply of id.
func (c *FirstApplies) end(id ObjectID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byID, id)
}

// Waiters remembers, per object id, the resources that found the object
// in the way (another owner's), so that its deletion brings them back at once.
type Waiters struct {
	mu   sync.Mutex
	byID map[ObjectID][]types.NamespacedName
}

// Add notes that nn waits for the object id, which another owner holds;
// nn is noted once however often it waits.
func (w *Waiters) Add(id ObjectID, nn types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byID == nil {
		w.byID = map[ObjectID][]types.NamespacedName{}
	}
	if !slices.Contains(w.byID[id], nn) {
		w.byID[id] = append(w.byID[id], nn)
	}
}

// Forget drops every wait of nn (a deleted resource).
func (w *Waiters) Forget(nn types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, nns := range w.byID {
		if nns = slices.DeleteFunc(nns, func(n types.NamespacedName) bool { return n == nn }); len(nns) == 0 {
			delete(w.byID, id)
		} else {
			w.byID[id] = nns
		}
	}
}

// Take returns the requests of the resources waiting for id, and forgets them.
func (w *Waiters) Take(id ObjectID) []reconcile.Request {
	w.mu.Lock()
	defer w.mu.Unlock()
	nns := w.byID[id]
	delete(w.byID, id)
	reqs := make([]reconcile.Request, 0, len(nns))
	for _, nn := range nns {
		reqs = append(reqs, reconcile.Request{NamespacedName: nn})
	}
	return reqs
}

// checkUnseen decides about a rendered object that the cache does not hold,
// that this process never applied, and whose create-first apply was refused
// (it exists, without stencil's labels or from another shard) or failed.
// One metadata-only read from the API server tells: absent (apply it), this
// resource's or adopted (apply it), or someone else's (conflict). It is a
// quorum read, not one from the API server's watch cache (resourceVersion
// "0"): the watch cache may lag, by seconds behind a busy API server, and a
// "not found" from it would let a force-apply take an object just created
// by someone else.
func (a *Applier) checkUnseen(ctx context.Context, d *unstructured.Unstructured) (verdict, error) {
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(d.GroupVersionKind())
	err := a.reader.Get(ctx, client.ObjectKeyFromObject(d), live)
	switch {
	case apierrors.IsNotFound(err):
		// Created only if it is still missing: someone may create it
		// after this read.
		if a.createFirst(d) {
			return verdict{decision: create}, nil
		}
		return verdict{decision: apply}, nil
	case err != nil:
		return verdict{}, fmt.Errorf("reading %s %s: %w", d.GetKind(), client.ObjectKeyFromObject(d), err)
	case ownedFor(live, d) && live.GetDeletionTimestamp() != nil:
		c := conflictWith(d, live)
		return verdict{decision: leave, conflict: &c}, nil
	case ownedFor(live, d) && CreateOnly(d):
		// It exists: a create-only object is not applied again. When it
		// came from another shard, it gets this shard's label, so that
		// this shard's cache holds it from now on.
		wrote, err := a.relabelShard(ctx, d, live)
		if wrote {
			return verdict{decision: relabeled}, err
		}
		return verdict{decision: compare}, err
	case ownedFor(live, d):
		// Ours, though not cached (it came from another shard, whose label
		// it carries): applied knowing its managers, as any cached object,
		// and only as it was read.
		return verdict{decision: apply, live: live, resourceVersion: live.GetResourceVersion()}, nil
	case adoptedBy(live, d):
		return verdict{decision: adopt, resourceVersion: live.GetResourceVersion()}, nil
	}
	c := conflictWith(d, live)
	return verdict{decision: leave, conflict: &c}, nil
}

// relabelShard sets, on an object of this resource that the cache does not
// hold, the shard label the render gives it (a resource moved between
// shards), with a UID precondition.
func (a *Applier) relabelShard(ctx context.Context, d *unstructured.Unstructured, live *metav1.PartialObjectMetadata) (wrote bool, err error) {
	want, ok := d.GetLabels()[v1alpha1.LabelShard]
	if live.GetLabels()[v1alpha1.LabelShard] == want {
		return false, nil
	}
	value := any(nil) // removed: the default shard's objects may carry none
	if ok {
		value = want
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": live.GetUID(), "labels": map[string]any{v1alpha1.LabelShard: value}}})
	if err != nil {
		return false, err
	}
	if err := writer(ctx, a.client).Patch(ctx, live, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldManager)); err != nil {
		return false, fmt.Errorf("labelling %s %s for this shard: %w", d.GetKind(), client.ObjectKeyFromObject(d), err)
	}
	return true, nil
}
