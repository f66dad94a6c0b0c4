package reconciler

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/stencil-operator/stencil/render"
)

// A missing CRD stops one kind, never the operator. A kind needs its own
// type and the types _kind.yaml declares (owned, observed, inputs); those
// the cluster does not serve when stencil starts are not watched. Their
// kind's controller runs and says so in each resource's status (Stalled,
// TypeNotServed), until the types are served; an optional owned type does
// not hold the kind back, it is only neither watched nor pruned meanwhile.
// awaitTypes asks the manager's RESTMapper again, with a backoff, and
// watches each type once it is served, without a restart; it flips a type
// to served between reconciles (nowServed), so that one reconcile renders
// and prunes with the same answer. A kind whose own type is not served is
// set up once it is (awaitOwnType); NewCache keeps the cache settings of
// types not served yet.
//
// Polling the RESTMapper, rather than watching CustomResourceDefinitions:
// a miss costs one discovery request (GET /apis/<group>/<version>), which
// every identity may make, so a namespace-scoped install needs no
// cluster-wide RBAC for it; it sees types an aggregated API server serves
// too; and it refreshes the very mapper the cache and the client use. A
// watch of CRDs would cache every CRD of the cluster whole (their schemas
// are large) for an event that comes once.

// Backoff of the look for types not served yet: from typeRetryBase,
// doubling, to typeRetryMax.
const (
	typeRetryBase = time.Second
	typeRetryMax  = 10 * time.Second
)

// servedTypes is what this process knows of which types the cluster
// serves, shared by the kinds: a type is looked up until it is served, and
// its informer indexed once.
type servedTypes struct {
	mapper meta.RESTMapper
	// index makes a type's informer ready for the kinds that watch it
	// (the owner UID index).
	index func(schema.GroupVersionKind) error
	mu    sync.Mutex
	known map[schema.GroupVersionKind]bool // served
}

// has reports whether the cluster serves gvk, asking the RESTMapper when it
// did not before; a newly served type is indexed first.
func (s *servedTypes) has(ctx context.Context, gvk schema.GroupVersionKind) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.known[gvk] {
		return true
	}
	if _, err := s.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
		switch {
		case errors.As(err, new(*apiutil.ErrResourceDiscoveryFailed)):
			// The type may well be served: its group's discovery failed
			// (an aggregated API server down). Taken as not served until
			// asked again.
			ctrl.LoggerFrom(ctx).Info("Discovery failed for a type's group; taking the type as not served for now", "type", apiVersionKind(gvk), "error", err.Error())
		case !meta.IsNoMatchError(err):
			ctrl.LoggerFrom(ctx).V(1).Info("Could not tell whether the cluster serves a type", "type", apiVersionKind(gvk), "error", err.Error())
		}
		return false
	}
	if s.index != nil {
		if err := s.index(gvk); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Could not index a type the cluster now serves", "type", apiVersionKind(gvk))
			return false
		}
	}
	s.known[gvk] = true
	return true
}

// kindTypes are the types one kind needs that the cluster did not serve
// when its controller was set up, until it does; safe for concurrent use.
type kindTypes struct {
	mu       sync.Mutex
	required map[schema.GroupVersionKind]bool // not served yet, and the kind waits for it
	optional map[schema.GroupVersionKind]bool // optional owned types: served?
}

// notServed is the error of a reconcile while required types are not
// served; nil when none is missing.
func (t *kindTypes) notServed() error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.required) == 0 {
		return nil
	}
	var names []string
	for gvk := range t.required {
		names = append(names, apiVersionKind(gvk))
	}
	slices.Sort(names)
	return fmt.Errorf("the cluster does not serve %s, which this kind needs: install its CRD (stencil starts the kind when it is served, without a restart), or, for an owned type the kind can do without, mark it optional: true in _kind.yaml",
		strings.Join(names, ", "))
}

// waitsFor are the required types not served yet.
func (t *kindTypes) waitsFor() []schema.GroupVersionKind {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Collect(maps.Keys(t.required))
}

// served reports whether gvk is served as far as the kind knows (types
// the kind does not declare are).
func (t *kindTypes) served(gvk schema.GroupVersionKind) bool {
	if t == nil {
		return true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	served, optional := t.optional[gvk]
	return !t.required[gvk] && (!optional || served)
}

// apiVersions are the optional types served, for render.WithAPIVersions.
func (t *kindTypes) apiVersions() []string {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for gvk, served := range t.optional {
		if served {
			out = append(out, apiVersionKind(gvk))
		}
	}
	return out
}

// pending are the types still to be looked for.
func (t *kindTypes) pending() []schema.GroupVersionKind {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := slices.Collect(maps.Keys(t.required))
	for gvk, served := range t.optional {
		if !served {
			out = append(out, gvk)
		}
	}
	return out
}

// names are the pending types, as apiVersionKind names them, sorted.
func (t *kindTypes) names() []string {
	var out []string
	for _, gvk := range t.pending() {
		out = append(out, apiVersionKind(gvk))
	}
	slices.Sort(out)
	return out
}

// nowServed records that gvk is served.
func (t *kindTypes) nowServed(gvk schema.GroupVersionKind) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.required, gvk)
	if _, ok := t.optional[gvk]; ok {
		t.optional[gvk] = true
	}
}

// typesOf looks up which of the types k needs (owned, observed, inputs)
// the cluster serves, and records those it does not.
func typesOf(ctx context.Context, k *render.Kind, served *servedTypes) *kindTypes {
	t := &kindTypes{required: map[schema.GroupVersionKind]bool{}, optional: map[schema.GroupVersionKind]bool{}}
	for _, ref := range k.Declaration().Owns {
		if ref.Optional {
			t.optional[ref.GroupVersionKind()] = served.has(ctx, ref.GroupVersionKind())
		}
	}
	needs := inputTypes(k)
	for _, ref := range append(slices.DeleteFunc(slices.Clone(k.Declaration().Owns), func(r render.TypeRef) bool { return r.Optional }), k.Declaration().Observes...) {
		needs = append(needs, ref.GroupVersionKind())
	}
	for _, gvk := range needs {
		if !served.has(ctx, gvk) {
			t.required[gvk] = true
			kindWaiting.WithLabelValues(k.GroupVersionKind().Kind, apiVersionKind(gvk)).Set(1)
		}
	}
	return t
}

// awaitOwnType looks, with a backoff, for gvk, the type of a kind not run
// because the cluster did not serve it at start-up, and once it is served
// sets up the kind's controller (start) in the running manager. The
// manager's cache holds the kind's type with its own settings (its shard's
// label selector; see NewCache) though it was not served when the cache
// was made.
func awaitOwnType(ctx context.Context, served *servedTypes, gvk schema.GroupVersionKind, start func() error) error {
	wait := typeRetryBase
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, typeRetryMax)
		if !served.has(ctx, gvk) {
			continue
		}
		ctrl.LoggerFrom(ctx).Info("The cluster now serves the CRD of a kind; starting it", "kind", gvk.Kind, "type", apiVersionKind(gvk))
		if err := start(); err != nil {
			return fmt.Errorf("starting kind %s, whose CRD the cluster now serves: %w", gvk.Kind, err)
		}
		return nil
	}
}

// awaitTypes looks, with a backoff, for the types the kind waits for, and
// once one is served watches it through controller c and reconciles every
// resource of the kind again: those Stalled for it converge.
func (r *Reconciler) awaitTypes(ctx context.Context, c controller.Controller, served *servedTypes, inputs cache.Cache) error {
	log := ctrl.LoggerFrom(ctx).WithValues("kind", r.kind().GroupVersionKind().Kind)
	wait := typeRetryBase
	for len(r.types.pending()) > 0 {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, typeRetryMax)
		for _, gvk := range r.types.pending() {
			if !served.has(ctx, gvk) {
				continue
			}
			if err := r.watchType(c, gvk, inputs); err != nil {
				log.Error(err, "Could not watch a type the cluster now serves", "type", apiVersionKind(gvk))
				continue
			}
			r.nowServed(gvk)
			kindWaiting.DeleteLabelValues(r.kind().GroupVersionKind().Kind, apiVersionKind(gvk))
			log.Info("The cluster now serves a type the kind needs; watching it", "type", apiVersionKind(gvk))
			if _, err := r.enqueueAll(ctx); err != nil && ctx.Err() == nil {
				log.Error(err, "Could not reconcile the kind's resources again")
			}
		}
	}
	return nil
}

// nowServed records that gvk is served, between reconciles: a reconcile
// holds r.swap's read lock from render to prune, so that what it rendered
// (without an optional type's objects, say) and what it prunes (every
// served type's objects that were not rendered) agree; a flip in between
// would prune the live objects of a type the render did not know of.
func (r *Reconciler) nowServed(gvk schema.GroupVersionKind) {
	r.swap.Lock()
	defer r.swap.Unlock()
	r.types.nowServed(gvk)
}

// watchType adds to c the watch the kind has of gvk: an owned, observed
// or input type.
func (r *Reconciler) watchType(c controller.Controller, gvk schema.GroupVersionKind, inputs cache.Cache) error {
	decl := r.kind().Declaration()
	var srcs []source.Source
	if slices.ContainsFunc(decl.Owns, func(t render.TypeRef) bool { return t.GroupVersionKind() == gvk }) {
		srcs = append(srcs, source.Kind[client.Object](r.cache, r.applier.Types().NewObject(gvk), r.ownedObjectHandler(gvk)))
	}
	if slices.ContainsFunc(decl.Observes, func(t render.TypeRef) bool { return t.GroupVersionKind() == gvk }) {
		srcs = append(srcs, source.Kind[client.Object](r.cache, r.applier.Types().NewObject(gvk), handler.EnqueueRequestsFromMapFunc(r.ownerByUID)))
	}
	if slices.Contains(inputTypes(r.kind()), gvk) && inputs != nil {
		srcs = append(srcs, source.Kind[client.Object](inputs, metadataOf(gvk), r.inputHandler(gvk)))
	}
	for _, src := range srcs {
		if err := c.Watch(src); err != nil {
			return err
		}
	}
	return nil
}

// renderKind is the kind's templates, told which of its optional types the
// cluster serves.
func (r *Reconciler) renderKind() *render.Kind {
	k := r.kind()
	if r.types == nil || len(k.OptionalTypes()) == 0 {
		return k
	}
	return k.WithAPIVersions(r.types.apiVersions())
}

// apiVersionKind names a type as "group/version/Kind" ("v1/Kind" for the
// core group), as .Capabilities and --api-versions do.
func apiVersionKind(gvk schema.GroupVersionKind) string {
	return gvk.GroupVersion().String() + "/" + gvk.Kind
}

// NewCache is the manager's cache (ctrl.Options.NewCache): cache.New, but
// the types of opts.ByObject that the cluster does not serve are cached
// apart, each with its own settings, rather than failing (see lateTypes):
// a kind that needs a type whose CRD is not installed waits for it, and
// the others run.
func NewCache(config *rest.Config, opts cache.Options) (cache.Cache, error) {
	opts.ByObject = maps.Clone(opts.ByObject)
	late := map[schema.GroupVersionKind]cache.Cache{}
	for obj, by := range opts.ByObject {
		gvk, err := apiutil.GVKForObject(obj, opts.Scheme)
		if err != nil {
			return nil, err
		}
		if _, err := opts.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
			continue
		}
		ctrl.Log.WithName("setup").Info("A type the cluster does not serve yet is cached apart, once it is", "type", apiVersionKind(gvk))
		delete(opts.ByObject, obj)
		if late[gvk], err = newLateCache(config, opts, by); err != nil {
			return nil, fmt.Errorf("making the cache of %s: %w", apiVersionKind(gvk), err)
		}
	}
	main, err := cache.New(config, opts)
	if err != nil || len(late) == 0 {
		return main, err
	}
	return &lateTypes{scheme: opts.Scheme, main: main, late: late}, nil
}
