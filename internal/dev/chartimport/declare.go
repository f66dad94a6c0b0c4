package chartimport

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing/fstest"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/render"
)

// Resource is a chart kind's custom resource, for a kind whose Go type is
// not built yet (the import's own renders).
type Resource struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              v1alpha1.Values `json:"spec"`
	Status            v1alpha1.Status `json:"status"`
}

// StencilStatus implements [v1alpha1.Object].
func (r *Resource) StencilStatus() *v1alpha1.Status { return &r.Status }

// StencilDriftPolicy implements [v1alpha1.Object].
func (r *Resource) StencilDriftPolicy() v1alpha1.DriftPolicy { return r.Spec.DriftPolicy() }

// DeepCopyObject implements [runtime.Object].
func (r *Resource) DeepCopyObject() runtime.Object {
	out := &Resource{TypeMeta: r.TypeMeta, Spec: *r.Spec.DeepCopy()}
	r.DeepCopyInto(&out.ObjectMeta)
	r.Status.DeepCopyInto(&out.Status)
	return out
}

// NewResource is a resource of kind gvk named release in namespace, whose
// spec is values.
func NewResource(gvk schema.GroupVersionKind, release, namespace string, values map[string]any) *Resource {
	r := &Resource{Spec: v1alpha1.Values{Object: values}}
	r.SetGroupVersionKind(gvk)
	r.SetName(release)
	r.SetNamespace(namespace)
	r.SetUID("00000000-0000-4000-8000-000000000001")
	return r
}

// Kind loads the folder as the kind gvk, with the declaration decl.
func Kind(gvk schema.GroupVersionKind, f *Folder, decl []byte) (*render.Kind, error) {
	return render.Load(f.definition(gvk, decl))
}

// definition is the folder, with the declaration decl, as the kind gvk
// whose Go type is [Resource].
func (f *Folder) definition(gvk schema.GroupVersionKind, decl []byte) render.Definition {
	fsys := fstest.MapFS{"_kind.yaml": {Data: decl}}
	for name, data := range f.Files {
		fsys[name] = &fstest.MapFile{Data: data}
	}
	return render.Definition{GroupVersionKind: gvk, Templates: fsys, New: func() v1alpha1.Object { return &Resource{} }, AddToScheme: AddToScheme(gvk)}
}

// ValuesFile is one of a chart's values files: its path in the chart
// (values.yaml, ci/…) and its values.
type ValuesFile struct {
	Path   string
	Values map[string]any
}

// Declare writes the kind's _kind.yaml: the types its templates may
// render, found in their literal apiVersion and kind lines and in what
// they render for each values file.
func Declare(gvk schema.GroupVersionKind, f *Folder, values []ValuesFile) ([]byte, error) {
	types := literalTypes(f)
	for gvk, optional := range templatedTypes(f) {
		if !slices.ContainsFunc(slices.Collect(maps.Keys(types)), func(t schema.GroupVersionKind) bool { return t.Kind == gvk.Kind }) {
			types[gvk] = optional
		}
	}
	var namespaces []string
	for range 100 {
		decl := declaration(types, namespaces, f.graph(), f.Tpl)
		k, err := Kind(gvk, f, decl)
		if err != nil {
			return nil, err
		}
		found, ns, err := renderedTypes(k, values)
		if err != nil && len(f.Missing) > 0 && strings.Contains(err.Error(), "no template ") {
			return nil, fmt.Errorf("%w (Chart.yaml lists dependencies that are not under charts/: %s; vendor them with helm dependency build, or copy them there, and import again)", err, strings.Join(f.Missing, ", "))
		}
		switch {
		case err != nil:
			return nil, err
		case ns != "":
			namespaces = append(namespaces, ns)
			f.note("_kind.yaml", 0, "the kind's objects are in namespace "+ns+" too, as the chart's templates write it (declared under namespaces): whoever may create its resources makes objects there, without an ownerReference; stencil's finalizer deletes them with the resource", "keep creating them to those who may write in "+ns+", or leave the objects out")
		case found == (schema.GroupVersionKind{}):
			f.noteReach(types)
			return decl, nil
		default:
			types[found] = false
		}
	}
	return nil, errors.New("the chart renders more than 100 types")
}

// noteReach notes the owned types that are privileged: that grant access,
// act on the whole cluster's requests, serve part of its API or reach
// beyond the resource's namespace. Whoever may create a resource of the
// kind chooses the chart's values, and so what the operator writes there.
func (f *Folder) noteReach(types map[schema.GroupVersionKind]bool) {
	for _, gvk := range slices.SortedFunc(maps.Keys(types), func(a, b schema.GroupVersionKind) int { return strings.Compare(a.String(), b.String()) }) {
		if why := privilege(gvk.GroupKind()); why != "" {
			f.note("_kind.yaml", 0, "the kind owns "+gvk.Kind+"s, which are privileged ("+why+"): whoever may create its resources chooses the chart's values, and so what the operator writes there", "keep creating them to the cluster's admins, or limit the operator's RBAC (docs/tenancy.md)")
		}
	}
}

// privilege says why a type is privileged, "" when it is not.
func privilege(gk schema.GroupKind) string {
	switch {
	case gk.Group == "rbac.authorization.k8s.io":
		return "they grant access"
	case gk.Group == "admissionregistration.k8s.io":
		return "they admit or refuse the whole cluster's requests"
	case gk.Group == "apiregistration.k8s.io":
		return "they serve part of the cluster's API"
	case clusterScoped[gk]:
		return "cluster-scoped: beyond the resource's namespace, cleaned up through a finalizer"
	}
	return ""
}

// renderedTypes renders every values file and returns the first type that
// is not declared yet (none: the zero value).
func renderedTypes(k *render.Kind, values []ValuesFile) (schema.GroupVersionKind, string, error) {
	k = k.WithAPIVersions(OptionalServed(k))
	for _, v := range values {
		_, _, err := RenderConverged(k, "release", "default", v.Values)
		if undeclared, ok := errors.AsType[*render.UndeclaredTypeError](err); ok {
			return undeclared.GroupVersionKind, "", nil
		}
		if other, ok := errors.AsType[*render.NamespaceError](err); ok && k.WritesNamespace(other.Namespace) {
			return schema.GroupVersionKind{}, other.Namespace, nil
		}
		if err != nil {
			return schema.GroupVersionKind{}, "", fmt.Errorf("rendering with %s: %w", v.Path, err)
		}
	}
	return schema.GroupVersionKind{}, "", nil
}

var apiVersionKind = regexp.MustCompile(`(?m)^apiVersion:\s*["']?([\w.\-/]+)["']?\s*\n(?:.*\n){0,3}?kind:\s*["']?(\w+)["']?\s*$`)

// literalTypes are the types the templates name literally: an apiVersion
// line and, within the next lines, a kind line (what only some values
// turn on is found here). Each is owned, not optional (false).
func literalTypes(f *Folder) map[schema.GroupVersionKind]bool {
	types := map[schema.GroupVersionKind]bool{}
	for name, data := range f.Files {
		if !strings.HasSuffix(name, ".yaml") || strings.HasPrefix(name, "_") {
			continue
		}
		for _, m := range apiVersionKind.FindAllStringSubmatch(string(data), -1) {
			if strings.HasSuffix(m[2], "List") {
				continue // a list's items are applied, each of its own type
			}
			types[schema.FromAPIVersionAndKind(m[1], m[2])] = false
		}
	}
	return types
}

var (
	// templatedAPIVersion is a templated apiVersion line and, within the
	// next lines, a literal kind line.
	templatedAPIVersion = regexp.MustCompile(`(?m)^apiVersion:\s*["']?(.*\{\{.*\}\}.*?)["']?\s*\n(?:.*\n){0,3}?kind:\s*["']?(\w+)["']?\s*$`)
	// quotedAPIVersion is a string literal that is an API version:
	// "policy/v1", "v1", "autoscaling/v2beta2".
	quotedAPIVersion = regexp.MustCompile(`"((?:[a-z0-9](?:[-a-z0-9.]*[a-z0-9])?/)?v[0-9]+(?:(?:alpha|beta)[0-9]+)?)"`)
	// included is the name of a template an action includes.
	included = regexp.MustCompile(`\b(?:include|template)\s+"([^"]+)"`)
)

// templatedTypes are the types an apiVersion templated on the cluster's
// capabilities may name ({{ ternary "policy/v1" "policy/v1beta1" … }}, or
// a helper such as bitnami's common.capabilities.policy.apiVersion): of
// the API versions the action or the helpers it includes quote, the
// newest at which Kubernetes' own API has the kind line's kind, by kind
// (a kind owns a type at one version; apps/v1 over extensions/v1beta1;
// the render picks what the cluster serves, as the chart asks). A GA
// version is owned (every cluster serves it: offline lint and render need
// no --api-versions); a beta or alpha one is optional (true).
func templatedTypes(f *Folder) map[schema.GroupVersionKind]bool {
	defines := helperBodies(f)
	newest := map[string]schema.GroupVersionKind{}
	for name, data := range f.Files {
		if !strings.HasSuffix(name, ".yaml") || strings.HasPrefix(name, "_") {
			continue
		}
		for _, m := range templatedAPIVersion.FindAllStringSubmatch(string(data), -1) {
			for _, gv := range quotedVersions(m[1], defines, 3) {
				gvk := schema.FromAPIVersionAndKind(gv, m[2])
				if !scheme.Scheme.Recognizes(gvk) {
					continue
				}
				if had, ok := newest[gvk.Kind]; !ok || version.CompareKubeAwareVersionStrings(gvk.Version, had.Version) > 0 {
					newest[gvk.Kind] = gvk
				}
			}
		}
	}
	types := map[schema.GroupVersionKind]bool{}
	for _, gvk := range newest {
		types[gvk] = strings.Contains(gvk.Version, "alpha") || strings.Contains(gvk.Version, "beta")
	}
	return types
}

// quotedVersions are the API versions text quotes, and those of the
// helpers it includes, depth levels deep.
func quotedVersions(text string, defines map[string]string, depth int) []string {
	var out []string
	for _, m := range quotedAPIVersion.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	if depth == 0 {
		return out
	}
	for _, m := range included.FindAllStringSubmatch(text, -1) {
		out = append(out, quotedVersions(defines[m[1]], defines, depth-1)...)
	}
	return out
}

var define = regexp.MustCompile(`\{\{-?\s*define\s+"([^"]+)"\s*-?\}\}`)

// helperBodies are the folder's defined templates' bodies, by name: from
// each define to the next one, or the file's end (a body's own if … end
// included; what follows its end is at most more to look through).
func helperBodies(f *Folder) map[string]string {
	out := map[string]string{}
	for _, data := range f.Files {
		text := string(data)
		starts := define.FindAllStringSubmatchIndex(text, -1)
		for i, m := range starts {
			end := len(text)
			if i+1 < len(starts) {
				end = starts[i+1][0]
			}
			out[text[m[2]:m[3]]] = text[m[1]:end]
		}
	}
	return out
}

// declaration is a _kind.yaml owning types (a ConfigMap when there are
// none yet: a kind owns at least one type).
func declaration(types map[schema.GroupVersionKind]bool, namespaces []string, graph map[string]render.Node, tpl string) []byte {
	if len(types) == 0 {
		types = map[schema.GroupVersionKind]bool{{Version: "v1", Kind: "ConfigMap"}: true}
	}
	var owns []render.TypeRef
	for _, gvk := range slices.SortedFunc(maps.Keys(types), func(a, b schema.GroupVersionKind) int {
		return strings.Compare(a.String(), b.String())
	}) {
		ref := render.TypeRef{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, ClusterScoped: clusterScoped[gvk.GroupKind()],
			// A custom resource's type (a ServiceMonitor) may not be served,
			// nor a type an apiVersion templated on the capabilities may
			// name (policy/v1beta1): the kind runs without it, and
			// .Capabilities.APIVersions.Has says whether it is, as the
			// chart expects.
			Optional: types[gvk] || !scheme.Scheme.Recognizes(gvk)}
		owns = append(owns, ref)
	}
	out, _ := yaml.Marshal(render.Declaration{Owns: owns, Graph: graph, Namespaces: namespaces, Tpl: tpl})
	return append([]byte("# The types the chart's templates render (stencil import chart).\n"), out...)
}

// clusterScoped are Kubernetes' own cluster-scoped types a chart may
// render.
var clusterScoped = map[schema.GroupKind]bool{
	{Kind: "Namespace"}: true, {Kind: "PersistentVolume"}: true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                         true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                  true,
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                                   true,
	{Group: "storage.k8s.io", Kind: "CSIDriver"}:                                      true,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:                 true,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                               true,
	{Group: "networking.k8s.io", Kind: "IngressClass"}:                                true,
	{Group: "node.k8s.io", Kind: "RuntimeClass"}:                                      true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}:   true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:     true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}:        true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}: true,
	{Group: "apiregistration.k8s.io", Kind: "APIService"}:                             true,
}

// OptionalServed are k's optional types (custom resources' types, such as
// a ServiceMonitor), as "group/version/Kind": the import renders them as
// served, and compares with helm template told the same (--api-versions).
func OptionalServed(k *render.Kind) []string {
	var out []string
	for _, gvk := range k.OptionalTypes() {
		out = append(out, gvk.GroupVersion().String()+"/"+gvk.Kind)
	}
	return out
}

// Render renders values (a values file) with k as the release release in
// namespace.
func Render(k *render.Kind, release, namespace string, values map[string]any) ([]*unstructured.Unstructured, error) {
	objs, _, err := RenderConverged(k, release, namespace, values)
	return objs, err
}

// ResourceList is a list of [Resource].
type ResourceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []Resource `json:"items"`
}

// DeepCopyObject implements [runtime.Object].
func (l *ResourceList) DeepCopyObject() runtime.Object {
	out := &ResourceList{TypeMeta: l.TypeMeta}
	l.DeepCopyInto(&out.ListMeta)
	for i := range l.Items {
		out.Items = append(out.Items, *l.Items[i].DeepCopyObject().(*Resource))
	}
	return out
}

// AddToScheme registers [Resource] as the kind gvk: a chart kind run
// without a Go type of its own (the import's tests).
func AddToScheme(gvk schema.GroupVersionKind) func(*runtime.Scheme) error {
	return func(s *runtime.Scheme) error {
		s.AddKnownTypeWithName(gvk, &Resource{})
		s.AddKnownTypeWithName(gvk.GroupVersion().WithKind(gvk.Kind+"List"), &ResourceList{})
		metav1.AddToGroupVersion(s, gvk.GroupVersion())
		return nil
	}
}
