package reconciler

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// lateTypes is the manager's cache when some types of its ByObject were
// not served when it was made (see NewCache): cache.New asks the
// RESTMapper about every ByObject type, so those are left out of main and
// each has a cache of its own, with its ByObject settings as defaults,
// which asks nothing until an informer of the type is asked for (once the
// type is served). Without it, such a type would be cached with the
// default settings, those of owned objects: an observed type with the
// shard's label selector, whose objects carry no shard label, would never
// be seen.
type lateTypes struct {
	scheme *runtime.Scheme
	main   cache.Cache
	late   map[schema.GroupVersionKind]cache.Cache
}

// newLateCache is the cache of one type not served yet: opts (without
// ByObject), with the type's settings as defaults.
func newLateCache(config *rest.Config, opts cache.Options, by cache.ByObject) (cache.Cache, error) {
	opts.ByObject = nil
	if by.Label != nil {
		opts.DefaultLabelSelector = by.Label
	}
	if by.Field != nil {
		opts.DefaultFieldSelector = by.Field
	}
	if by.Transform != nil {
		opts.DefaultTransform = by.Transform
	}
	if by.UnsafeDisableDeepCopy != nil {
		opts.DefaultUnsafeDisableDeepCopy = by.UnsafeDisableDeepCopy
	}
	if by.Namespaces != nil {
		opts.DefaultNamespaces = by.Namespaces
	}
	if by.SyncPeriod != nil {
		opts.SyncPeriod = by.SyncPeriod
	}
	return cache.New(config, opts)
}

func (c *lateTypes) of(o runtime.Object) (cache.Cache, error) {
	gvk, err := apiutil.GVKForObject(o, c.scheme)
	if err != nil {
		return nil, err
	}
	return c.ofKind(schema.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: strings.TrimSuffix(gvk.Kind, "List")}), nil
}

func (c *lateTypes) ofKind(gvk schema.GroupVersionKind) cache.Cache {
	if late, ok := c.late[gvk]; ok {
		return late
	}
	return c.main
}

func (c *lateTypes) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	one, err := c.of(obj)
	if err != nil {
		return err
	}
	return one.Get(ctx, key, obj, opts...)
}

func (c *lateTypes) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	one, err := c.of(list)
	if err != nil {
		return err
	}
	return one.List(ctx, list, opts...)
}

func (c *lateTypes) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	one, err := c.of(obj)
	if err != nil {
		return nil, err
	}
	return one.GetInformer(ctx, obj, opts...)
}

func (c *lateTypes) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...cache.InformerGetOption) (cache.Informer, error) {
	return c.ofKind(gvk).GetInformerForKind(ctx, gvk, opts...)
}

func (c *lateTypes) RemoveInformer(ctx context.Context, obj client.Object) error {
	one, err := c.of(obj)
	if err != nil {
		return err
	}
	return one.RemoveInformer(ctx, obj)
}

func (c *lateTypes) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	one, err := c.of(obj)
	if err != nil {
		return err
	}
	return one.IndexField(ctx, obj, field, extract)
}

// Start runs every cache until ctx ends or one fails.
func (c *lateTypes) Start(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	all := append([]cache.Cache{c.main}, slices.Collect(maps.Values(c.late))...)
	errs := make(chan error, len(all))
	for _, one := range all {
		go func() { errs <- one.Start(ctx) }()
	}
	var failed error
	for range all {
		if err := <-errs; err != nil && !errors.Is(err, context.Canceled) && failed == nil {
			failed = err
			cancel() // the others stop too
		}
	}
	return failed
}

func (c *lateTypes) WaitForCacheSync(ctx context.Context) bool {
	synced := c.main.WaitForCacheSync(ctx)
	for _, late := range c.late {
		synced = late.WaitForCacheSync(ctx) && synced
	}
	return synced
}
