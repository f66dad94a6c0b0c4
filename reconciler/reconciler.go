package reconciler

import (
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/stencil-operator/stencil/reconciler/engine"
	"github.com/stencil-operator/stencil/reconciler/rollout"
	"github.com/stencil-operator/stencil/reconciler/shard"
	"github.com/stencil-operator/stencil/reconciler/syncmap"
	"github.com/stencil-operator/stencil/render"
)

// StatusFieldManager is the field manager of the custom resources' status,
// which is merge-patched (the engine's FieldManager applies their objects).
const StatusFieldManager = "stencil-status"

// Reconciler reconciles the custom resources of one kind. One generic type
// serves every kind.
type Reconciler struct {
	// current is the kind's templates (read through kind); swap lets a
	// reload replace them between reconciles (see reload.go).
	current  atomic.Pointer[render.Kind]
	swap     sync.RWMutex
	client   client.Client
	reader   client.Reader // uncached: what the cache cannot be trusted with
	recorder events.EventRecorder
	applier  *engine.Applier
	// statusWrites tells the watch events of our status writes from others'.
	statusWrites engine.OwnWrites[client.ObjectKey]
	// owners maps the UIDs of the resources this process reconciled to
	// them: an observed object's owner-UID label finds its resource.
	owners syncmap.Map[types.UID, types.NamespacedName]
	// memory is what this process remembers of each resource between
	// reconciles (memory.go).
	memory memory
	// waiters are the resources that found an object held by another
	// owner; its deletion brings them back.
	waiters engine.Waiters
	// rewrites paces the reconciles again that follow another writer's
	// change to an object while stencil wrote it: at once at first, then
	// backing off while it keeps happening (a fight).
	rewrites workqueue.TypedRateLimiter[types.NamespacedName]
	// rollout paces template changes (nil: not at all).
	rollout *rollout.Gate
	// identities says which ServiceAccount writes the kind's objects;
	// tenants makes its clients (nil: stencil writes them itself).
	identities Identities
	tenants    *tenants
	// mayWrite is Options.MayWrite (nil: always).
	mayWrite func() error
	// shards is Options.Shards (nil: unsharded, no claims).
	shards *shard.Shards
	scheme *runtime.Scheme
	// leases tells whether a shard that holds a claim still runs (nil:
	// claims are never taken over).
	leases *shard.LeaseWatch
	// claims is the set of resources this shard holds (for the gauge).
	claims syncmap.Map[types.NamespacedName, struct{}]
	// recheck wakes the resources whose applies the watch has not shown
	// (see recheckUnseen).
	recheck chan event.GenericEvent
	// orphans are the resources (by UID) deleted with propagationPolicy
	// Orphan (see orphaning).
	orphans syncmap.Map[types.UID, struct{}]
	// inputs are the inputs each resource of a graph kind read last.
	inputs inputReads
	// inputCache holds the inputs' metadata (nil: no kind has inputs);
	// inputMemo the inputs as last read, by who read them.
	inputCache client.Reader
	inputMemo  *inputMemo
	// types are the types the kind needs that the cluster did not serve
	// when the controller was set up (see served.go); cache is the
	// manager's, which watches them once they are.
	types *kindTypes
	cache cache.Cache
	// started is the kind as its controller was set up: its watches and
	// types are of these templates' declaration (see unwatched).
	started *render.Kind
}

// forget drops what this process remembers of a deleted custom resource.
func (r *Reconciler) forget(nn types.NamespacedName) {
	for _, uid := range r.memory.forget(nn).uids {
		r.owners.Delete(uid)
		r.orphans.Delete(uid)
	}
	// What the components beside the reconciler keep of it.
	unhealthy.forget(r.kind().GroupVersionKind().Kind, nn)
	r.rewrites.Forget(nn)
	r.waiters.Forget(nn)
	r.rollout.Forget(nn)
	r.inputs.forget(nn)
}
