package reconciler

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/reconciler/syncmap"
)

// A resource's objects can be written as a ServiceAccount of its namespace
// rather than as stencil, as Flux's serviceAccountName and
// --default-service-account do: the namespace's RBAC then bounds what its
// resources can make, whatever the templates render. stencil impersonates
// the ServiceAccount for every write of the resource's objects (applies,
// dry runs, recreates, prunes); its cache, its reads and the resource's own
// status and finalizer stay stencil's. Before any write it asks the API
// server, as the ServiceAccount, whether it may create, patch and delete
// each type the render holds in its namespace (a SelfSubjectAccessReview, answers
// yes kept a minute): one it may not, and nothing is applied or pruned;
// the resource is Stalled, reason Forbidden, and looks again in 30 s.

// writerExtra is the user extra stencil sets on the writes it makes as a
// ServiceAccount: its admission policy (config/policy) lets them set
// stencil's control keys, which a tenant's own writes may not (only who may
// impersonate the extra can set it: stencil's RBAC, internal/operator/kinds).
const writerExtra = "stencil-writer"

// Identities says which ServiceAccount writes a kind's objects.
type Identities struct {
	// Default is the ServiceAccount, in each resource's namespace, that
	// writes its objects; empty: stencil's own identity.
	Default string
	// ByKind overrides Default for a kind (by its Kind).
	ByKind map[string]string
}

// serviceAccount is the ServiceAccount that writes kind's objects, "" for
// stencil itself.
func (ids Identities) serviceAccount(kind string) string {
	if sa, ok := ids.ByKind[kind]; ok {
		return sa
	}
	return ids.Default
}

// tenants makes and keeps one impersonating client per ServiceAccount.
type tenants struct {
	config  *rest.Config
	scheme  *runtime.Scheme
	clients syncmap.Map[string, client.Client] // by "namespace/name"
	access  syncmap.Map[accessKey, accessAnswer]
}

type accessKey struct {
	user, verb, group, resource, namespace string
}

type accessAnswer struct {
	allowed bool
	at      time.Time
}

// accessTTL is how long an answer that the ServiceAccount may is trusted:
// a RoleBinding removed shows within it (the API server refuses the write
// meanwhile anyway). forbiddenRetry is when a resource whose ServiceAccount
// may not write its objects looks again: no event tells of a new
// RoleBinding.
const (
	accessTTL      = time.Minute
	forbiddenRetry = 30 * time.Second
)

func newTenants(config *rest.Config, scheme *runtime.Scheme) *tenants {
	return &tenants{config: config, scheme: scheme}
}

// client is the client that acts as ServiceAccount sa of namespace.
func (t *tenants) client(namespace, sa string, base client.Client) (client.Client, error) {
	key := namespace + "/" + sa
	if c, ok := t.clients.Load(key); ok {
		return c, nil
	}
	cfg := rest.CopyConfig(t.config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: serviceAccountUser(namespace, sa), Extra: map[string][]string{writerExtra: {"stencil"}}}
	c, err := client.New(cfg, client.Options{Scheme: t.scheme, Mapper: base.RESTMapper()})
	if err != nil {
		return nil, fmt.Errorf("a client acting as ServiceAccount %s: %w", key, err)
	}
	actual, _ := t.clients.LoadOrStore(key, c)
	return actual, nil
}

func serviceAccountUser(namespace, sa string) string {
	return "system:serviceaccount:" + namespace + ":" + sa
}

// denied lists what ServiceAccount sa of cr's namespace (acting through c)
// may not do to desired's objects: create and patch each type in its
// namespace. Empty: it may do all of it.
func (t *tenants) denied(ctx context.Context, c client.Client, namespace, sa string, desired []*unstructured.Unstructured) ([]string, error) {
	var denied []string
	seen := map[accessKey]bool{}
	for _, d := range desired {
		mapping, err := c.RESTMapper().RESTMapping(d.GroupVersionKind().GroupKind(), d.GroupVersionKind().Version)
		if err != nil {
			return nil, fmt.Errorf("mapping %s: %w", d.GroupVersionKind(), err)
		}
		for _, verb := range []string{"create", "patch", "delete"} { // delete: prunes and recreates
			k := accessKey{user: serviceAccountUser(namespace, sa), verb: verb, group: mapping.Resource.Group, resource: mapping.Resource.Resource, namespace: d.GetNamespace()}
			if seen[k] {
				continue
			}
			seen[k] = true
			ok, err := t.allowed(ctx, c, k)
			if err != nil {
				return nil, err
			}
			if !ok {
				denied = append(denied, describeAccess(k, mapping.Resource))
			}
		}
	}
	slices.Sort(denied)
	return denied, nil
}

// allowed asks the API server, as the ServiceAccount, whether it may do k,
// or answers from an answer younger than accessTTL.
func (t *tenants) allowed(ctx context.Context, c client.Client, k accessKey) (bool, error) {
	if v, ok := t.access.Load(k); ok && time.Since(v.at) < accessTTL {
		return v.allowed, nil
	}
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: k.namespace, Verb: k.verb, Group: k.group, Resource: k.resource},
	}}
	if err := c.Create(ctx, review); err != nil {
		return false, fmt.Errorf("asking whether %s may %s %s: %w", k.user, k.verb, k.resource, err)
	}
	if review.Status.Allowed {
		// Only a yes is kept: a resource refused looks again soon
		// (forbiddenRetry) and sees a new RoleBinding then.
		t.access.Store(k, accessAnswer{allowed: true, at: time.Now()})
	}
	return review.Status.Allowed, nil
}

func describeAccess(k accessKey, r schema.GroupVersionResource) string {
	where := "in namespace " + k.namespace
	if k.namespace == "" {
		where = "(cluster-scoped)"
	}
	resource := r.Resource
	if r.Group != "" {
		resource += "." + r.Group
	}
	return k.verb + " " + resource + " " + where
}

// actAs is the client of the ServiceAccount that writes cr's objects (nil:
// stencil writes them), or, when it may not write all of desired, refused:
// what it may not do.
func (r *Reconciler) actAs(ctx context.Context, cr v1alpha1.Object, desired []*unstructured.Unstructured) (writer client.Client, refused, err error) {
	sa := r.identities.serviceAccount(r.kind().GroupVersionKind().Kind)
	if sa == "" || r.tenants == nil {
		return nil, nil, nil
	}
	c, err := r.tenants.client(cr.GetNamespace(), sa, r.client)
	if err != nil {
		return nil, nil, err
	}
	denied, err := r.tenants.denied(ctx, c, cr.GetNamespace(), sa, desired)
	if err != nil {
		return nil, nil, err
	}
	if len(denied) > 0 {
		return nil, fmt.Errorf("ServiceAccount %s/%s, which writes this resource's objects, may not %s",
			cr.GetNamespace(), sa, strings.Join(denied, ", nor ")), nil
	}
	return c, nil, nil
}
