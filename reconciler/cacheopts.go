package reconciler

import (
	"encoding/json"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/reconciler/engine"
	"github.com/stencil-operator/stencil/render"
)

// CacheOptions makes the manager's cache hold only what stencil needs: every
// custom resource of the kinds, and of all other types only the objects
// labelled as stencil's. Custom resources are held without their
// managedFields, which nothing reads (finalizers and status go in merge
// patches); owned objects keep theirs for the drift check, and those read
// whole are trimmed to what stencil reads of them (trimmedTypes). The
// labels and annotations of every object but the custom resources share
// their strings (engine.InternMetadata).
func CacheOptions(kinds []*render.Kind) cache.Options {
	return ShardCacheOptions(kinds, labels.Everything())
}

// ShardCacheOptions is CacheOptions for one shard: the custom resources
// that shard selects (see Shards).
func ShardCacheOptions(kinds []*render.Kind, shard labels.Selector) cache.Options {
	byObject := map[client.Object]cache.ByObject{}
	for _, k := range kinds {
		byObject[k.New()] = cache.ByObject{Label: shard, Transform: cache.TransformStripManagedFields()}
	}
	// Objects stencil applies, or that a pod template's ownerLabels made:
	// both labels. managed-by=stencil alone is a common label anyone may
	// set; the owner UID ties an object to one resource (and stencil's
	// admission policy lets only stencil set it: config/policy).
	ownerUID, err := labels.NewRequirement(v1alpha1.LabelOwnerUID, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant, valid key
	}
	stencils := labels.SelectorFromSet(labels.Set{v1alpha1.LabelManagedBy: v1alpha1.ManagedByStencil}).Add(*ownerUID)
	owned := stencils
	if reqs, selectable := shard.Requirements(); selectable {
		owned = owned.Add(reqs...) // objects carry their resource's shard label
	}
	// Observed objects (a Deployment's Pods) carry no shard label: held
	// by every shard, as they are labelled.
	observed := map[schema.GroupVersionKind]bool{}
	for _, k := range kinds {
		for _, ref := range k.Declaration().Observes {
			observed[ref.GroupVersionKind()] = true
		}
	}
	for _, k := range kinds { // a type also owned, or a kind, keeps its shard's selector
		delete(observed, k.GroupVersionKind())
		for _, ref := range k.Declaration().Owns {
			delete(observed, ref.GroupVersionKind())
		}
	}
	for gvk := range observed {
		o := &unstructured.Unstructured{}
		o.SetGroupVersionKind(gvk)
		byObject[o] = cache.ByObject{Label: stencils, Transform: notOwnedTransform()}
	}
	trim := trimmedTypes(kinds)
	return cache.Options{
		DefaultLabelSelector: owned,
		DefaultTransform: func(obj any) (any, error) {
			obj = dropStatusFields(engine.InternMetadata(obj))
			if trim.holds(obj) {
				return engine.Trim(obj)
			}
			return obj, nil
		},
		ByObject: byObject,
	}
}

// notOwnedTransform is the transform of the observed objects (a
// Deployment's Pods), which stencil reads but does not own: it drops their
// managedFields, which nothing reads of them, and gives their labels and
// annotations shared strings (engine.InternMetadata), as owned objects
// have: a pod carries its pod template's labels.
func notOwnedTransform() func(any) (any, error) {
	strip := cache.TransformStripManagedFields()
	return func(obj any) (any, error) {
		obj, err := strip(obj)
		if err != nil {
			return obj, err
		}
		return engine.InternMetadata(obj), nil
	}
}

// inputTransform is the transform of the graph kinds' input cache, which
// holds every object of an input type (any ConfigMap, whoever wrote it):
// only its name, labels and resourceVersion are read (which resources
// read it; whether the memo of the last read still holds), so its
// annotations (kubectl's last-applied-configuration among them) go with
// its managedFields, and its labels get shared strings.
func inputTransform() func(any) (any, error) {
	transform := notOwnedTransform()
	return func(obj any) (any, error) {
		if m, ok := obj.(metav1.Object); ok {
			m.SetAnnotations(nil)
		}
		return transform(obj)
	}
}

// trimmed says which owned objects the cache holds trimmed
// ([engine.Trim]): unstructured ones (of types the scheme does not know,
// custom resources) of a type their owner's kind reads through its status
// template or health rules only, which read what Trim keeps; not those of
// a kind that reads them whole (its graph's or lookup's templates, an
// owns entry that says whole), nor any of a type some kind observes. The
// owner is the kind its stencil.dev/owner annotation names.
type trimmed struct{ byOwner engine.TrimmedTypes }

func trimmedTypes(kinds []*render.Kind) trimmed {
	return trimmed{byOwner: trimmedGVKs(kinds)}
}

// trimmedGVKs are the types trimmedTypes describes, by owner kind.
func trimmedGVKs(kinds []*render.Kind) engine.TrimmedTypes {
	observed := map[schema.GroupVersionKind]bool{}
	for _, k := range kinds {
		for _, ref := range k.Declaration().Observes {
			observed[ref.GroupVersionKind()] = true
		}
	}
	out := engine.TrimmedTypes{}
	for _, k := range kinds {
		for _, ref := range k.Declaration().Owns {
			gvk := ref.GroupVersionKind()
			if (ref.Status || ref.JudgesHealth()) && !ref.Whole && !k.ReadsLive() && !observed[gvk] {
				owner := k.GroupVersionKind().GroupKind()
				if out[owner] == nil {
					out[owner] = map[schema.GroupVersionKind]bool{}
				}
				out[owner][gvk] = true
			}
		}
	}
	return out
}

// holds: obj is an object the cache holds trimmed.
func (t trimmed) holds(obj any) bool {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return false
	}
	owner, _, ok := v1alpha1.ParseOwnerAnnotation(u.GetAnnotations()[v1alpha1.AnnotationOwner])
	return ok && t.byOwner.Trims(owner, u.GroupVersionKind())
}

// dropStatusFields drops, from an owned object held in the cache, the
// managedFields entries of writes to its status subresource (a
// Deployment's, by kube-controller-manager) that record status fields only:
// no template sets them. An entry of a status write that also holds
// metadata (an annotation set through /status) stays, so that drift and
// fight messages can still name its manager, and so do entries of the
// scale subresource: an autoscaler's write of spec.replicas through it is
// what hand-over and the drift check must see. On a cluster with
// controllers this is about a kilobyte per Deployment.
func dropStatusFields(obj any) any {
	m, ok := obj.(metav1.Object)
	if !ok {
		return obj // a tombstone: nothing to trim
	}
	entries := m.GetManagedFields()
	kept := slices.DeleteFunc(slices.Clone(entries), statusOnly)
	if len(kept) < len(entries) {
		m.SetManagedFields(kept)
	}
	return obj
}

// statusOnly: e is a status write whose fields are all under status.
func statusOnly(e metav1.ManagedFieldsEntry) bool {
	if e.Subresource != "status" || e.FieldsV1 == nil {
		return false
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &top); err != nil {
		return false
	}
	for k := range top {
		if k != "f:status" && k != "." {
			return false
		}
	}
	return true
}

// ClientOptions makes the manager's client read unstructured objects (the
// owned types whose status templates read them whole) from the cache too;
// controller-runtime's default sends those reads to the API server.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{Unstructured: true}}
}

// inputCache is the cache of the graph kinds' inputs, metadata only and
// not limited to stencil's labels (an input is someone else's object):
// its events tell which resources to render again, whose renders then read
// the inputs from the API server. nil when no kind has inputs.
func inputCache(mgr ctrl.Manager, kinds []*render.Kind, namespaces []string) (cache.Cache, error) {
	if !slices.ContainsFunc(kinds, func(k *render.Kind) bool { return len(inputTypes(k)) > 0 }) {
		return nil, nil
	}
	opts := cache.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), DefaultTransform: inputTransform()}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	c, err := cache.New(mgr.GetConfig(), opts)
	if err != nil {
		return nil, fmt.Errorf("making the cache of the kinds' inputs: %w", err)
	}
	if err := mgr.Add(c); err != nil {
		return nil, err
	}
	return c, nil
}
