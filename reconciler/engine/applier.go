package engine

import (
	"context"
	"errors"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/reconciler/syncmap"
)

// FieldManager is the field manager of the objects stencil applies.
const FieldManager = "stencil"

// Applier server-side-applies rendered objects, and only those that need it.
//
// An object needs an apply when it is missing, when its desired-hash
// annotation differs from the new render, or when our field manager no longer
// owns every field it owned right after our last apply of that render (its
// baseline): another manager took a field. Baselines come from apply
// responses, so values the API server normalises and list keys it fills in
// are never mistaken for drift. A fresh process takes the live records as
// baselines when the resource's status vouches for them (see
// restoreBaselines), else learns each baseline once, with a server-side
// dry-run apply; after that a converged object costs no request.
type Applier struct {
	client    client.Client
	reader    client.Reader
	baselines syncmap.Map[ObjectKey, baseline]
	health    syncmap.Map[ObjectKey, appliedHealth]
	// Types says how the cache holds each owned type.
	types CachedTypes
	// Writes tells the watch events of our own applies from others'.
	writes OwnWrites[ObjectKey]
	// firstApplies, shared by every kind, let one resource at a time create an
	// object name.
	firstApplies *FirstApplies
	// Fights paces the corrections of objects another writer keeps
	// changing back.
	fights *Fights
	// refused remembers the object ids whose create-first apply was
	// refused (they exist and are not in the cache: someone else's, as a
	// rule): their next check reads first, rather than try again.
	refused syncmap.Map[ObjectID, struct{}]
	// noVersionOnCreate remembers the types whose API server refuses a
	// create that names a version (see exists): their objects are read
	// first and then applied as they are.
	noVersionOnCreate syncmap.Map[schema.GroupVersionKind, struct{}]
	// OwnerKind is the type of the custom resources whose objects this
	// applier applies, and owns the types they declare (prune looks there).
	ownerKind schema.GroupVersionKind
	owns      []OwnedType
	// beyond are the namespaces, besides each owner's, where its objects
	// may be (Options.Namespaces).
	beyond []string
	served func(schema.GroupVersionKind) bool // nil: every type
	// Recorder tells a resource, in events, what prune left in place.
	recorder events.EventRecorder
}

// OwnedType is a type of object the owners declare.
type OwnedType struct {
	GVK           schema.GroupVersionKind
	ClusterScoped bool
}

// Options configure an Applier.
type Options struct {
	// Client writes, and reads from the cache (stencil's objects, of the
	// types in Types); Reader reads from the API server.
	Client client.Client
	Reader client.Reader
	Types  CachedTypes
	// FirstApplies are shared by every Applier of a process, so that one owner
	// at a time creates an object name.
	FirstApplies *FirstApplies
	// OwnerKind is the type of the owners (custom resources), and Owns the
	// types they declare: prune looks there, and in each owner's inventory.
	OwnerKind schema.GroupVersionKind
	Owns      []OwnedType
	// Namespaces are the namespaces, besides each owner's own, where its
	// namespaced objects may be (_kind.yaml's namespaces): prune and the
	// finalizer look there too.
	Namespaces []string
	// Recorder tells an owner, in events, what prune left in place.
	Recorder events.EventRecorder
	// Served, when set, says whether the cluster serves a type: prune
	// leaves the types it does not (an optional type whose CRD is not
	// installed has no objects, and listing it would fail).
	Served func(schema.GroupVersionKind) bool
}

// New is an Applier of the owners of opts.OwnerKind.
func New(opts Options) (*Applier, error) {
	switch {
	case opts.Client == nil || opts.Reader == nil:
		return nil, errors.New("an applier needs a client and a reader")
	case opts.Recorder == nil:
		return nil, errors.New("an applier needs an event recorder")
	case opts.OwnerKind.Empty():
		return nil, errors.New("an applier needs its owners' kind")
	case opts.FirstApplies == nil:
		return nil, errors.New("an applier needs the process's first applies")
	case len(opts.Types.Whole) > 0 && opts.Types.Scheme == nil:
		return nil, errors.New("an applier needs the scheme of the types it caches")
	}
	return &Applier{client: opts.Client, reader: opts.Reader, types: opts.Types, firstApplies: opts.FirstApplies, fights: NewFights(),
		ownerKind: opts.OwnerKind, owns: opts.Owns, beyond: opts.Namespaces, recorder: opts.Recorder, served: opts.Served}, nil
}

// Types says how the cache holds each type.
func (a *Applier) Types() CachedTypes { return a.types }

// UnseenSince names the owners of the applies that no watch event has
// shown since cutoff (see OwnWrites.UnseenSince).
func (a *Applier) UnseenSince(cutoff time.Time) []string { return a.writes.UnseenSince(cutoff) }

// appliedHealth is what kstatus said of the object of version
// resourceVersion that our apply returned (types whose health the kind
// judges): what to judge by until the cache catches up.
type appliedHealth struct {
	resourceVersion uint64
	health          ObjectHealth
}

// cacheGrace is how long stencil trusts that the cache only lags behind an
// apply of its own. Past it, an object the cache still does not hold is
// looked up again: its events may have been missed (a watch that expired and
// re-listed after the object was already deleted).
const cacheGrace = 10 * time.Second

// OwnWrite reports whether o, as a watch delivered it, is our own apply's
// result: the very version our last apply produced, or, while an apply is in
// flight, any version (noted, and judged when the apply returns).
func (a *Applier) OwnWrite(gvk schema.GroupVersionKind, o metav1.Object) bool {
	key := keyOf(gvk, o)
	return a.writes.Note(key, ResourceVersion(o), func() bool {
		b, ok := a.baselines.Load(key)
		return ok && b.resourceVersion != 0 && b.resourceVersion == ResourceVersion(o)
	})
}

// PendingHealth is the health of our last apply of d while the cache holds
// an older version of it (cached: 0 when it holds none), less than
// cacheGrace after that apply; nil otherwise. The cache drops the event of
// our own write, so judging its older version would say what was, not what is.
func (a *Applier) PendingHealth(d *unstructured.Unstructured, cached uint64) *ObjectHealth {
	b, ok := a.baselines.Load(KeyOf(d))
	if !ok {
		return nil
	}
	if b.hash != d.GetAnnotations()[v1alpha1.AnnotationDesiredHash] || cached >= b.resourceVersion || time.Since(b.appliedAt) >= cacheGrace {
		return nil
	}
	h, ok := a.health.Load(KeyOf(d))
	if !ok || h.resourceVersion != b.resourceVersion {
		return nil
	}
	return &h.health
}

// RememberHealth records h, what kstatus said of the object of version rv
// that our apply of d returned, for PendingHealth. It is kept beside the
// baseline, not in it, so that it cannot bring back a baseline that a
// deletion dropped meanwhile; without the baseline of that version it is
// never read.
func (a *Applier) RememberHealth(d *unstructured.Unstructured, rv uint64, h ObjectHealth) {
	a.health.Store(KeyOf(d), appliedHealth{resourceVersion: rv, health: h})
}

// ForgetDeleted drops the baseline of an object that was deleted, so that the
// next reconcile applies it again instead of waiting for the cache.
func (a *Applier) ForgetDeleted(gvk schema.GroupVersionKind, o metav1.Object) {
	a.forgetKey(keyOf(gvk, o))
}

// forget drops the baseline of a pruned object.
func (a *Applier) forget(gvk schema.GroupVersionKind, namespace, name string, uid types.UID) {
	a.forgetKey(ObjectKey{id: NewID(gvk, namespace, name), owner: string(uid)})
}

// forgetKey drops all this process remembers of one object.
func (a *Applier) forgetKey(key ObjectKey) {
	a.writes.forget(key)
	a.baselines.Delete(key)
	a.health.Delete(key)
	a.fights.forget(key)
}

// writerKey carries, in a reconcile's context, the client that writes the
// resource's objects.
type writerKey struct{}

// WithWriter is ctx carrying c as the client that writes the resource's
// objects (see writer).
func WithWriter(ctx context.Context, c client.Client) context.Context {
	return context.WithValue(ctx, writerKey{}, c)
}

// writer is the client that writes the objects of the resource being
// reconciled: its ServiceAccount's, else fallback (stencil's).
func writer(ctx context.Context, fallback client.Client) client.Client {
	if c, ok := ctx.Value(writerKey{}).(client.Client); ok {
		return c
	}
	return fallback
}
