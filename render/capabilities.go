package render

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// fnCapabilities is the template function that says which API versions the
// cluster serves, as Helm's .Capabilities does (a template's dot is the
// custom resource, so it is a function): (capabilities).APIVersions.Has
// "cert-manager.io/v1/Certificate", or "cert-manager.io/v1".
const fnCapabilities = "capabilities"

// Capabilities is what the capabilities function returns.
type Capabilities struct {
	APIVersions APIVersions
}

// APIVersions answers which of a kind's declared types the cluster serves.
type APIVersions struct{ k *Kind }

// Has reports whether the cluster serves v: "group/version/Kind" or
// "group/version" ("v1/Service" and "v1" for the core group). It answers
// only for the types the kind declares in _kind.yaml (its own, owns,
// observes, inputs) and their group/versions, so that a render gives the
// same answer offline and live: anything else is an error. Every declared
// type is served but the optional owned ones the caller did not name (see
// [Kind.WithAPIVersions]): the kind does not run without the others.
func (v APIVersions) Has(s string) (bool, error) {
	gvk, isKind := parseAPIVersion(s)
	declared := v.k.declaredTypes()
	if isKind {
		if !slices.Contains(declared, gvk) {
			return false, fmt.Errorf("%s.APIVersions.Has %q: %s does not declare this type; declare it under owns (optional: true when the cluster may not serve it)", fnCapabilities, s, declarationFile)
		}
		return v.k.serves(gvk), nil
	}
	known := false
	for _, t := range declared {
		if t.GroupVersion() == gvk.GroupVersion() {
			known = true
			if v.k.serves(t) {
				return true, nil
			}
		}
	}
	if !known {
		return false, fmt.Errorf("%s.APIVersions.Has %q: %s declares no type of this group/version; declare it under owns (optional: true when the cluster may not serve it)", fnCapabilities, s, declarationFile)
	}
	return false, nil
}

// parseAPIVersion reads "group/version/Kind" (isKind) or "group/version";
// a last segment that begins with a capital letter is a kind.
func parseAPIVersion(s string) (gvk schema.GroupVersionKind, isKind bool) {
	s = strings.TrimSpace(s)
	if i := strings.LastIndex(s, "/"); i >= 0 && startsUpper(s[i+1:]) {
		return schema.FromAPIVersionAndKind(s[:i], s[i+1:]), true
	}
	gv, _ := schema.ParseGroupVersion(s) // an invalid one matches nothing
	return gv.WithKind(""), false
}

func startsUpper(s string) bool {
	return s != "" && unicode.IsUpper(rune(s[0]))
}

// WithAPIVersions returns a copy of k whose optional owned types are served
// when versions names them ("group/version/Kind") or their group/version
// ("group/version"): what the cluster serves, live; what --api-versions
// says, offline. Other entries are ignored. Without it no optional type is
// served.
func (k *Kind) WithAPIVersions(versions []string) *Kind {
	c := *k
	c.cluster.served = map[schema.GroupVersionKind]bool{}
	for _, s := range versions {
		want, isKind := parseAPIVersion(s)
		for gvk, t := range k.owns {
			if t.Optional && (gvk == want || !isKind && gvk.GroupVersion() == want.GroupVersion()) {
				c.cluster.served[gvk] = true
			}
		}
	}
	return &c
}

// OptionalTypes are the kind's optional owned types, sorted.
func (k *Kind) OptionalTypes() []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	for gvk, t := range k.owns {
		if t.Optional {
			out = append(out, gvk)
		}
	}
	slices.SortFunc(out, func(a, b schema.GroupVersionKind) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// serves: gvk, a declared type, is served (every one but an optional owned
// type that [Kind.WithAPIVersions] did not name).
func (k *Kind) serves(gvk schema.GroupVersionKind) bool {
	t, owned := k.owns[gvk]
	return !owned || !t.Optional || k.cluster.served[gvk]
}

// declaredTypes are the kind's own type and those _kind.yaml declares.
func (k *Kind) declaredTypes() []schema.GroupVersionKind {
	set := map[schema.GroupVersionKind]bool{k.GroupVersionKind(): true}
	for gvk := range k.owns {
		set[gvk] = true
	}
	for _, t := range k.declaration.Observes {
		set[t.GroupVersionKind()] = true
	}
	for _, in := range k.Graph().Inputs() {
		set[in.GroupVersionKind()] = true
	}
	return slices.Collect(maps.Keys(set))
}

// checkServed refuses an object of an optional type the cluster does not
// serve: applying it could only fail, again and again.
func (k *Kind) checkServed(gvk schema.GroupVersionKind, name string) error {
	if k.serves(gvk) {
		return nil
	}
	apiVersion := gvk.GroupVersion().String() + "/" + gvk.Kind
	return fmt.Errorf("%s %q: the cluster does not serve %s (optional in %s: its CRD is not installed); render it only when {{ if (%s).APIVersions.Has %q }}, or install its CRD",
		gvk.Kind, name, apiVersion, declarationFile, fnCapabilities, apiVersion)
}

// execution is an execution of k's templates of at most bytes (the limit
// named name), whose capabilities function answers for k.
func (k *Kind) execution(bytes int, name string) (*execution, error) {
	run, err := k.runs.get(k.limits, bytes, name)
	if err != nil {
		return nil, err
	}
	run.b.capabilities = &Capabilities{APIVersions: APIVersions{k: k}}
	run.b.tplPolicy = k.tpl
	return run, nil
}

// capabilitiesFunc is the capabilities function of an execution whose
// budget b carries them; a decorator's templates have none.
func capabilitiesFunc(b *budget) func() (Capabilities, error) {
	return func() (Capabilities, error) {
		if b.capabilities == nil {
			return Capabilities{}, fmt.Errorf("%s: only a kind's templates may call it", fnCapabilities)
		}
		return *b.capabilities, nil
	}
}

// cluster is what a kind's templates are told of the cluster they render
// for. Each part is set on a copy of the kind by its With… builder; the
// zero value answers as a cluster that serves no optional type, at
// [DefaultKubeVersion], under [ReleaseService].
type cluster struct {
	// served are the optional owned types the cluster serves (see
	// [Kind.WithAPIVersions]).
	served map[schema.GroupVersionKind]bool
	// kube is .Capabilities.KubeVersion (see [Kind.WithKubeVersion]).
	kube *KubeVersion
	// service is .Release.Service (see [Kind.WithReleaseService]).
	service string
}

// releaseService is .Release.Service.
func (c cluster) releaseService() string {
	if c.service != "" {
		return c.service
	}
	return ReleaseService
}

// kubeVersion is .Capabilities.KubeVersion.
func (c cluster) kubeVersion() KubeVersion {
	if c.kube != nil {
		return *c.kube
	}
	v, _ := ParseKubeVersion(DefaultKubeVersion)
	return v
}
