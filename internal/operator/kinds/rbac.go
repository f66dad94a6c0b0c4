package kinds

import (
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/render"
)

// Verbs stencil needs, by what it does with a type.
var (
	ownedVerbs    = []string{"create", "delete", "get", "list", "patch", "update", "watch"}
	observedVerbs = []string{"get", "list", "watch"}
	kindVerbs     = []string{"get", "list", "patch", "update", "watch"}
	statusVerbs   = []string{"get", "patch", "update"}
	// A decorator applies labels and annotations to its parents.
	parentVerbs = []string{"get", "list", "patch", "watch"}
)

// ClusterRole is the least RBAC the operator needs, derived from the kinds'
// declarations: its custom resources (with status and finalizers), every
// owned type, every observed type, every decorator's parent, owned and
// observed types, and events. `make manifests` writes it to
// config/rbac/role.yaml.
//
// plurals are the resource names the kinds' CRDs declare (CRDPlurals): a
// CRD may name its resource otherwise than the kind's plural
// (+kubebuilder:resource:path). They come first; a type they do not name
// gets its declaration's resource, else [render.Plural] of its kind.
func ClusterRole(operator string, kinds []*render.Kind, decorators []*render.Decorator, plurals map[schema.GroupKind]string) rbacv1.ClusterRole {
	need := map[string]map[string][]string{} // group → resource → verbs
	add := func(group, resource string, verbs []string) {
		if need[group] == nil {
			need[group] = map[string][]string{}
		}
		merged := slices.Concat(need[group][resource], verbs)
		slices.Sort(merged)
		need[group][resource] = slices.Compact(merged)
	}
	plural := func(t render.TypeRef) string {
		if p, ok := plurals[t.GroupVersionKind().GroupKind()]; ok {
			return p
		}
		return t.PluralResource()
	}
	addType := func(t render.TypeRef, verbs []string) { add(t.GroupVersionKind().Group, plural(t), verbs) }
	var crds, converting []string
	for _, k := range kinds {
		gvk := k.GroupVersionKind()
		plural := plural(render.TypeRef{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind})
		if k.Conversion().Converts() {
			converting = append(converting, plural+"."+gvk.Group)
		} else {
			crds = append(crds, plural+"."+gvk.Group)
		}
		add(gvk.Group, plural, kindVerbs)
		add(gvk.Group, plural+"/status", statusVerbs)
		add(gvk.Group, plural+"/finalizers", []string{"update"})
		for _, t := range k.Declaration().Owns {
			addType(t, ownedVerbs)
		}
		for _, t := range k.Declaration().Observes {
			addType(t, observedVerbs)
		}
		for _, in := range k.Graph().Inputs() {
			addType(in.TypeRef(), observedVerbs) // read, never written
		}
		if k.Generates() {
			// The Secret that keeps its generated values (the garbage
			// collector deletes it with the resource).
			add("", "secrets", []string{"create", "get", "update"})
		}
	}
	for _, d := range decorators {
		decl := d.Declaration()
		addType(decl.Decorates.TypeRef, parentVerbs)
		if len(decl.Owns) > 0 {
			// Children carry an ownerReference with blockOwnerDeletion, which
			// the OwnerReferencesPermissionEnforcement admission plugin
			// allows only to who may update the parent's finalizers.
			add(decl.Decorates.GroupVersionKind().Group, plural(decl.Decorates.TypeRef)+"/finalizers", []string{"update"})
		}
		for _, t := range decl.Owns {
			addType(t, ownedVerbs)
		}
		for _, o := range decl.Observes {
			addType(o.TypeRef, observedVerbs)
		}
		// A namespace selector (--decorator-namespace-selector) reads the
		// labels of the Namespaces.
		add("", "namespaces", observedVerbs)
	}
	add("", "events", []string{"create", "patch"})
	add("events.k8s.io", "events", []string{"create", "patch"})
	// Writing as a ServiceAccount of a resource's namespace
	// (--default-service-account) needs impersonation, which
	// config/impersonation grants for the ServiceAccount names it lists:
	// not here, where it would reach every ServiceAccount of the cluster.
	// Setting stencil's control keys: its admission policy (config/policy)
	// lets only who may "set" controlkeys.stencil.dev do it.
	add("stencil.dev", "controlkeys", []string{"set"})
	all := rules(need)
	if len(crds) > 0 {
		// The kinds' own CRDs, by name: the start-up check defaults the
		// templates' test cases with them, as the API server defaults a
		// resource.
		slices.Sort(crds)
		all = append(all, rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, ResourceNames: crds, Verbs: []string{"get"}})
	}
	if len(converting) > 0 {
		// The CRDs of kinds with several versions: stencil serves their
		// conversion webhook and writes its CA bundle into them.
		slices.Sort(converting)
		all = append(all, rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, ResourceNames: converting, Verbs: []string{"get", "patch"}},
			// Once every stored resource is at the storage version, stencil
			// drops the others from status.storedVersions.
			rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions/status"}, ResourceNames: converting, Verbs: []string{"update"}})
	}
	return rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: operator + "-manager", Labels: map[string]string{"app.kubernetes.io/name": operator}},
		Rules:      all,
	}
}

// rules turns group → resource → verbs into sorted rules, one per group and
// set of verbs.
func rules(need map[string]map[string][]string) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, group := range sortedKeys(need) {
		byVerbs := map[string][]string{}
		for _, resource := range sortedKeys(need[group]) {
			verbs := strings.Join(need[group][resource], ",")
			byVerbs[verbs] = append(byVerbs[verbs], resource)
		}
		for _, verbs := range sortedKeys(byVerbs) {
			out = append(out, rbacv1.PolicyRule{APIGroups: []string{group}, Resources: byVerbs[verbs], Verbs: strings.Split(verbs, ",")})
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// ClusterRoleYAML is ClusterRole as the file config/rbac/role.yaml holds it.
func ClusterRoleYAML(operator string, kinds []*render.Kind, decorators []*render.Decorator, plurals map[schema.GroupKind]string) ([]byte, error) {
	out, err := yaml.Marshal(ClusterRole(operator, kinds, decorators, plurals))
	if err != nil {
		return nil, fmt.Errorf("encoding the ClusterRole: %w", err)
	}
	header := "# Generated by `make manifests` from the kinds' declarations (templates/*/_kind.yaml, _decorator.yaml).\n# Do not edit: declare types in _kind.yaml or _decorator.yaml instead.\n"
	return append([]byte(header), out...), nil
}
