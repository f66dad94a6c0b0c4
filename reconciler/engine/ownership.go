package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
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
