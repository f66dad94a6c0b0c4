package render

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/template"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// Definition registers a kind: its Go type and its folder of templates.
// Its fields are stencil.Kind's, in the same order (pkg/stencil converts
// one into the other).
type Definition struct {
	// GroupVersionKind of the custom resource.
	GroupVersionKind schema.GroupVersionKind
	// New returns an empty custom resource of the kind.
	New func() v1alpha1.Object
	// AddToScheme adds the kind's Go types to a scheme (the render does
	// not read it).
	AddToScheme func(*runtime.Scheme) error
	// Templates is the kind's folder: *.yaml templates, a _kind.yaml
	// declaration, optional _*.tpl helpers and an optional kustomization.yaml.
	Templates fs.FS
	// ShortNames are the kind's short names, as its CRD declares them
	// (+kubebuilder:resource:shortName); `stencil drift` accepts them.
	ShortNames []string
}

// DecoratorDefinition registers a decorator: a folder of templates whose
// parent is an existing type (its _decorator.yaml names it), with no Go type.
type DecoratorDefinition struct {
	// Name is the decorator's name, as --decorators names it.
	Name string
	// Templates is the decorator's folder: *.yaml templates, a
	// _decorator.yaml and optional _*.tpl helpers.
	Templates fs.FS
}

// Declaration is a kind's _kind.yaml: the types its templates may emit, and
// so the only types stencil applies, prunes and needs RBAC for.
type Declaration struct {
	// Owns lists the types the templates may emit.
	Owns []TypeRef `json:"owns"`
	// Observes lists types the kind's status reads but does not own.
	Observes []TypeRef `json:"observes,omitempty"`
	// Graph orders and gates the templates, by node: a template's file
	// name without .yaml (see [Node]). A kind with a graph or inputs is a
	// graph kind, rendered by [Kind.RenderGraph].
	Graph map[string]Node `json:"graph,omitempty"`
	// Inputs are objects the templates read but stencil does not own, by
	// the name the input function takes (see [Input]).
	Inputs map[string]Input `json:"inputs,omitempty"`
	// Conversion says, by version, what converting between it and the
	// hub may lose (see _from-<version>.yaml and _to-<version>.yaml).
	Conversion map[string]VersionConversion `json:"conversion,omitempty"`
	// Breaking lists, by version, the changes to the released API
	// (config/crd/released) that are meant: field paths such as
	// spec.size, or "*" for the version itself. stencil lint refuses any
	// other breaking change.
	Breaking map[string][]string `json:"breaking,omitempty"`
	// DroppedByPreferred lists, by the version kubectl preferred at the
	// release, its fields that the new preferred version does not keep,
	// on purpose: clients that name no version lose them without an
	// error. stencil lint refuses any other.
	DroppedByPreferred map[string][]string `json:"droppedByPreferred,omitempty"`
	// OwnerVersion is the version of the kind that the owned objects'
	// ownerReferences name (default: the hub). A kind that gains a version
	// keeps the one its objects were made with, so that the new version
	// changes none of them. The garbage collector reads the owner at this
	// version: it must stay served.
	OwnerVersion string `json:"ownerVersion,omitempty"`
	// Tpl says which strings the tpl function runs as templates: "own",
	// the kind's own only (its chart's values and files: the default for
	// chart kinds, whose resources' values are a tenant's data), or "any",
	// its resources' values too (the default for other kinds, whose
	// templates pass a spec field to tpl only on purpose). Under "own", a
	// resource's value with template actions fails the render.
	Tpl string `json:"tpl,omitempty"`
	// Namespaces are the namespaces, besides the resource's own, where
	// its namespaced objects may be (a chart's RoleBinding in
	// kube-system): the platform team's choice, never a tenant's, whose
	// values can name no other. Such objects carry no ownerReference (none
	// crosses namespaces): stencil's finalizer deletes them with the
	// resource, and its labels and owner annotation prove them its own.
	Namespaces []string `json:"namespaces,omitempty"`
}

// The values of [Declaration.Tpl].
const (
	TplOwn = "own"
	TplAny = "any"
)

// VersionConversion is what a kind declares about converting between one
// of its versions and the hub.
type VersionConversion struct {
	// Dropped are the fields (paths such as spec.tls, of either version)
	// that the other version cannot hold: converting keeps them in an
	// annotation, and lint does not call them uncovered.
	Dropped []string `json:"dropped,omitempty"`
}

// TypeRef names a type.
type TypeRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Resource is the plural resource name, for RBAC (default: the
	// kind's regular plural, see [Plural]).
	Resource string `json:"resource,omitempty"`
	// ClusterScoped types get no ownerReference and no namespace; stencil
	// cleans them up through a finalizer.
	ClusterScoped bool `json:"clusterScoped,omitempty"`
	// Status: the status template reads the objects of this owned type,
	// not only their metadata. Of a type the scheme does not know (cached
	// as maps), stencil then caches, of each, its metadata, its status, the fields
	// the templates set and the spec fields health rules read
	// (replicas…); the rest (what the API server defaulted, what other
	// writers set) is dropped, unless Whole says otherwise. Types the
	// scheme knows are cached typed, whole.
	Status bool `json:"status,omitempty"`
	// Whole: the status template reads these objects whole, fields that
	// neither the templates nor the health rules set included (a NodePort
	// the API server allocates): stencil caches them whole. Implies
	// Status.
	Whole bool `json:"whole,omitempty"`
	// Health: the resource is Ready only when every object of this owned
	// type is healthy by the kstatus rules (stencil then caches, of each,
	// what Status says).
	// Unset, it is true for the types whose health kstatus reads from their
	// status (see [TypeRef.JudgesHealth]).
	Health *bool `json:"health,omitempty"`
	// Optional (owned types only): the kind runs without the type when
	// the cluster does not serve it (its CRD is not installed); stencil
	// then neither watches nor prunes it, and a render that holds one
	// fails. Templates ask with (capabilities).APIVersions.Has.
	Optional bool `json:"optional,omitempty"`
}

// JudgesHealth reports whether the resource's Ready waits for the objects of
// this type to be healthy: as Health says, or, when it is unset, for the
// built-in types kstatus has status rules for (Deployments, StatefulSets,
// DaemonSets, ReplicaSets, Pods, PersistentVolumeClaims, Jobs,
// PodDisruptionBudgets, CustomResourceDefinitions) and for custom resources
// (whose Ready, Reconciling and Stalled conditions kstatus reads). Other
// built-in types are left out: kstatus calls every ConfigMap, Secret or
// ClusterIP Service healthy, so caching them whole would buy nothing (a
// LoadBalancer Service waits for its address only with health: true).
func (t TypeRef) JudgesHealth() bool {
	if t.Health != nil {
		return *t.Health
	}
	gvk := t.GroupVersionKind()
	return statusRuled[gvk.GroupKind()] || !builtIn(gvk.Group)
}

// statusRuled are the built-in types whose health kstatus reads from their
// status.
var statusRuled = map[schema.GroupKind]bool{
	{Group: "apps", Kind: "Deployment"}:                               true,
	{Group: "apps", Kind: "StatefulSet"}:                              true,
	{Group: "apps", Kind: "DaemonSet"}:                                true,
	{Group: "apps", Kind: "ReplicaSet"}:                               true,
	{Group: "", Kind: "Pod"}:                                          true,
	{Group: "", Kind: "PersistentVolumeClaim"}:                        true,
	{Group: "batch", Kind: "Job"}:                                     true,
	{Group: "policy", Kind: "PodDisruptionBudget"}:                    true,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}: true,
}

// builtIn: the group is one of Kubernetes' own (the core group, a group
// without a dot, or one under k8s.io), as opposed to a custom resource's.
func builtIn(group string) bool {
	return !strings.Contains(group, ".") || group == "k8s.io" || strings.HasSuffix(group, ".k8s.io")
}

// GroupVersionKind of the type.
func (t TypeRef) GroupVersionKind() schema.GroupVersionKind {
	return schema.FromAPIVersionAndKind(t.APIVersion, t.Kind)
}

// PluralResource is the type's resource name: Resource, else [Plural] of
// its kind.
func (t TypeRef) PluralResource() string {
	if t.Resource != "" {
		return t.Resource
	}
	return Plural(t.Kind)
}

// Plural is the resource name of a kind: the regular English plural of its
// lower-case name (policy → policies, gateway → gateways, box → boxes,
// class → classes), as Kubernetes names its own types (but Endpoints, whose
// name is plural already) and as stencil's scaffold names a new kind's
// (Person → persons: the type's marker says so, so that controller-gen's
// CRD agrees). A custom resource with another plural says so in its CRD,
// or in an owns entry's resource.
func Plural(kind string) string {
	l := strings.ToLower(kind)
	switch {
	case l == "endpoints":
		return l
	case len(l) > 1 && strings.HasSuffix(l, "y") && !strings.ContainsRune("aeiou", rune(l[len(l)-2])):
		return l[:len(l)-1] + "ies"
	case strings.HasSuffix(l, "s"), strings.HasSuffix(l, "x"), strings.HasSuffix(l, "z"), strings.HasSuffix(l, "ch"), strings.HasSuffix(l, "sh"):
		return l + "es"
	}
	return l + "s"
}

// Files with special meaning in a kind's folder.
const (
	declarationFile   = "_kind.yaml"
	statusFile        = "_status.yaml"
	kustomizationFile = "kustomization.yaml"
)

// Kind is a parsed, ready-to-render kind. It is immutable and safe for
// concurrent use.
type Kind struct {
	def         Definition
	declaration Declaration
	owns        map[schema.GroupVersionKind]TypeRef
	tmpl        *template.Template
	manifests   []string // template names rendered as manifests, sorted
	kustomize   bool
	status      bool // has a status template
	digest      string
	limits      Limits
	runs        *executions // shared by the copies WithLimits makes
	graph       *graph      // nil: not a graph kind
	// cluster is what its templates are told of the cluster
	// (capabilities.go).
	cluster cluster
	// chart: a chart kind's chart (see _chart.yaml); nil for others.
	chart *chart
	// spokes are the kind's versions other than the hub, which its
	// conversion templates convert (see [Conversion.Convert]).
	spokes []string
	// tpl is what tpl may run in its templates (see [Kind.loadGuards]).
	tpl tplPolicy
	// written is what its template files write themselves (written.go).
	written written
	// looksUp: a chart kind whose templates call lookup.
	looksUp bool
	// generates: a chart kind whose templates generate values (see
	// [Generated]); manifestNames are its manifests' names, Helm's too.
	generates     bool
	manifestNames map[string]bool
}

// Load parses a kind's folder once: every template with missingkey=error and
// the declaration. A template that does not parse is an error here, at
// start-up, never at reconcile time.
func Load(def Definition) (*Kind, error) {
	name := def.GroupVersionKind.Kind
	k := &Kind{def: def, owns: map[schema.GroupVersionKind]TypeRef{}, limits: DefaultLimits}
	raw, err := fs.ReadFile(def.Templates, declarationFile)
	if err != nil {
		return nil, fmt.Errorf("kind %s: reading %s: %w", name, declarationFile, err)
	}
	if err := yaml.UnmarshalStrict(raw, &k.declaration); err != nil {
		return nil, fmt.Errorf("kind %s: parsing %s: %w", name, declarationFile, err)
	}
	if len(k.declaration.Owns) == 0 {
		return nil, fmt.Errorf("kind %s: %s declares no owned types", name, declarationFile)
	}
	owned := map[schema.GroupKind]string{}
	for _, t := range k.declaration.Owns {
		gvk := t.GroupVersionKind()
		if v, twice := owned[gvk.GroupKind()]; twice {
			// One object is one object at any version: stencil keeps its
			// records of it by group and kind, and one informer per type.
			return nil, fmt.Errorf("kind %s: %s declares owned type %s twice (versions %s and %s); declare one version", name, declarationFile, gvk.GroupKind(), v, gvk.Version)
		}
		owned[gvk.GroupKind()] = gvk.Version
		k.owns[gvk] = t
	}
	for _, t := range k.declaration.Observes {
		if t.Optional {
			return nil, fmt.Errorf("kind %s: %s: observed type %s is optional; only owned types may be", name, declarationFile, t.GroupVersionKind())
		}
	}
	if k.spokes, err = conversions(def.Templates, def.GroupVersionKind.Version); err != nil {
		return nil, fmt.Errorf("kind %s: %w", name, err)
	}
	if v := k.declaration.OwnerVersion; v != "" && v != def.GroupVersionKind.Version && !slices.Contains(k.spokes, v) {
		return nil, fmt.Errorf("kind %s: %s: ownerVersion %s is not one of the kind's versions (%s and those of its conversion templates)", name, declarationFile, v, def.GroupVersionKind.Version)
	}
	for v := range k.declaration.Conversion {
		if !slices.Contains(k.spokes, v) {
			return nil, fmt.Errorf("kind %s: %s: conversion.%s: the kind has no conversion templates for %s (%s%s.yaml, %s%s.yaml)", name, declarationFile, v, v, fromPrefix, v, toPrefix, v)
		}
	}
	if k.chart, err = loadChart(def.Templates); err != nil {
		return nil, fmt.Errorf("kind %s: %w", name, err)
	}
	if err := k.loadGuards(); err != nil {
		return nil, fmt.Errorf("kind %s: %w", name, err)
	}
	tmpl, manifests, entries, err := parseFolder(name, def.Templates, declarationFile, k.chart.name())
	if err != nil {
		return nil, fmt.Errorf("kind %s: %w", name, err)
	}
	k.tmpl, k.runs = tmpl, newExecutions(tmpl)
	if k.written, err = readWritten(def.Templates, entries); err != nil {
		return nil, fmt.Errorf("kind %s: %w", name, err)
	}
	k.status = tmpl.Lookup(statusFile) != nil
	k.findCalls(manifests)
	k.kustomize = slices.Contains(manifests, kustomizationFile)
	k.manifests = slices.DeleteFunc(manifests, func(f string) bool { return f == kustomizationFile })
	if len(k.manifests) == 0 {
		return nil, fmt.Errorf("kind %s: no *.yaml templates", name)
	}
	if k.declaration.Graph != nil || k.declaration.Inputs != nil || callsGraph(tmpl, k.manifests) {
		if k.kustomize {
			return nil, fmt.Errorf("kind %s: a graph kind cannot use kustomize: kustomize transforms the objects of every node at once", name)
		}
		if k.graph, err = compileGraph(k.declaration, tmpl, k.manifests); err != nil {
			return nil, fmt.Errorf("kind %s: %s: %w", name, declarationFile, err)
		}
		if err := k.keepsSecretsFromStatus(); err != nil {
			return nil, fmt.Errorf("kind %s: %s: %w", name, declarationFile, err)
		}
	}
	if k.digest, err = digestFolder(def.Templates, entries); err != nil {
		return nil, fmt.Errorf("kind %s: %w", name, err)
	}
	if k.chart != nil {
		extra, err := chartFolders(def.Templates)
		if err != nil {
			return nil, fmt.Errorf("kind %s: %w", name, err)
		}
		k.digest = digestFiles(k.digest, extra)
	}
	return k, nil
}

// secretGVK is the type whose data a Secret input holds.
var secretGVK = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}

// keepsSecretsFromStatus refuses a graph kind that reads a Secret input and
// would let its status template or health read its Secrets, which may hold
// the input's data: Secrets declared status: true or health: true (both
// hand the status template the whole objects, see [Kind.ReadsWhole]), or
// observed Secrets (the status template reads those too).
func (k *Kind) keepsSecretsFromStatus() error {
	if !k.graph.readsSecretInput() {
		return nil
	}
	if t, ok := k.owns[secretGVK]; ok && (t.Status || t.Whole) {
		return errors.New("the kind reads a Secret input and declares Secrets status: true or whole: true: its status template could copy the input's data into the resource's status")
	}
	if t, ok := k.owns[secretGVK]; ok && t.JudgesHealth() {
		return errors.New("the kind reads a Secret input and declares Secrets health: true: health would cache them whole for its status template, which could copy the input's data into the resource's status")
	}
	for _, t := range k.declaration.Observes {
		if t.GroupVersionKind() == secretGVK {
			return errors.New("the kind reads a Secret input and observes Secrets: its status template could copy the input's data into the resource's status")
		}
	}
	return nil
}

// Engine is the version of what this package makes of templates: the
// stamping of labels and annotations, the desired hash, the template
// functions, kustomize. It is part of every kind's [Kind.Templates], so that
// a release that renders the same templates otherwise is rolled out at a
// pace like a template change. Bump it with any change of render's output
// for unchanged templates. TestEngineVersion fails until you do when the
// test kind's golden renders change; a change they do not exercise (a
// template function they do not call, kustomize) is yours to notice.
const Engine = "1"

// digestFolder is "sha256:" and the first 12 hex digits of a digest of the
// render [Engine] and every file of a kind's folder, names and contents, in
// name order.
func digestFolder(fsys fs.FS, entries []fs.DirEntry) (string, error) {
	h := sha256.New()
	_, _ = fmt.Fprintf(h, "engine %s\x00", Engine)
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		src, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return "", fmt.Errorf("reading %s: %w", e.Name(), err)
		}
		_, _ = fmt.Fprintf(h, "%s\x00%d\x00", e.Name(), len(src))
		h.Write(src)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))[:12], nil
}

// parseFolder parses a folder's templates, every *.yaml and *.tpl file but
// the declaration, into one template set named name with the template
// functions. manifests are the *.yaml files not named _*, in name order;
// entries, the folder's files. A chart kind's (chartName not "") read a
// missing key as empty, as Helm's do, and each manifest is also named as
// Helm names it (see [HelmTemplateName]), for the includes of
// .Template.BasePath.
func parseFolder(name string, fsys fs.FS, declaration, chartName string) (tmpl *template.Template, manifests []string, entries []fs.DirEntry, err error) {
	tmpl = template.New(name).Option("missingkey=error")
	tmpl.Funcs(funcs(tmpl))
	if chartName != "" {
		tmpl.Option("missingkey=zero")
		tmpl.Funcs(chartFuncs())
	}
	if entries, err = fs.ReadDir(fsys, "."); err != nil {
		return nil, nil, nil, fmt.Errorf("listing templates: %w", err)
	}
	sources := map[string]string{}
	for _, e := range parseOrder(entries, chartName) {
		file, ext := e.Name(), path.Ext(e.Name())
		if e.IsDir() || file == declaration || ext != ".yaml" && ext != ".tpl" {
			continue
		}
		if chartName != "" && (file == chartFile || file == valuesFile) {
			continue // data, never templates: a chart's values may hold template text
		}
		src, err := fs.ReadFile(fsys, file)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("reading %s: %w", file, err)
		}
		if _, err := tmpl.New(file).Parse(string(src)); err != nil {
			return nil, nil, nil, fmt.Errorf("parsing %w", err)
		}
		sources[file] = string(src)
		if ext == ".yaml" && !strings.HasPrefix(file, "_") {
			manifests = append(manifests, file)
		}
	}
	slices.Sort(manifests)
	if err := instrument(sources, tmpl.Templates()...); err != nil {
		return nil, nil, nil, err
	}
	if chartName != "" {
		addSites(tmpl.Templates()...) // before a tree has a second name
	}
	for _, file := range manifests {
		if chartName == "" {
			break
		}
		if _, err := tmpl.AddParseTree(HelmTemplateName(chartName, file), tmpl.Lookup(file).Tree); err != nil {
			return nil, nil, nil, fmt.Errorf("naming %s as Helm does: %w", file, err)
		}
	}
	return tmpl, manifests, entries, nil
}

// parseOrder is the order a folder's files are parsed in: by name, but a
// chart kind's subcharts' files first, so that, as in Helm, a template the
// chart defines replaces a subchart's of the same name.
func parseOrder(entries []fs.DirEntry, chartName string) []fs.DirEntry {
	if chartName == "" {
		return entries
	}
	out := slices.Clone(entries)
	slices.SortStableFunc(out, func(a, b fs.DirEntry) int {
		sa, _ := subchartOf(a.Name())
		sb, _ := subchartOf(b.Name())
		switch {
		case sa != "" && sb == "":
			return -1
		case sa == "" && sb != "":
			return 1
		}
		return 0
	})
	return out
}

// GroupVersionKind of the kind's custom resource.
func (k *Kind) GroupVersionKind() schema.GroupVersionKind { return k.def.GroupVersionKind }

// New returns an empty custom resource of the kind.
func (k *Kind) New() v1alpha1.Object { return k.def.New() }

// JudgesHealth reports whether the kind's Ready waits for its objects of
// type gvk to be healthy (see [TypeRef.JudgesHealth]).
func (k *Kind) JudgesHealth(gvk schema.GroupVersionKind) bool {
	t, ok := k.owns[gvk]
	return ok && t.JudgesHealth()
}

// ReadsWhole reports whether the kind's status template may read its
// objects of type gvk whole: an owned type declared status: true, or one
// whose health it judges (see [TypeRef.JudgesHealth]).
func (k *Kind) ReadsWhole(gvk schema.GroupVersionKind) bool {
	t, ok := k.owns[gvk]
	return ok && (t.Status || t.Whole || t.JudgesHealth())
}

// ReadsLive reports whether the kind's templates read its live objects
// whole: a graph kind's (object, objects), a chart kind's that call
// lookup.
func (k *Kind) ReadsLive() bool { return k.graph != nil || k.looksUp }

// SecretNode is the graph node that rendered o (its annotation says which)
// when that node's template reads Secret data; "" otherwise. It does when
// it reads a Secret input, or the objects of a node that holds a Secret
// input's data, or the objects of a node that renders a Secret: the
// graph's own Secrets (a generated password, one a person chose in a
// Secret the node adopted) are Secret data too. rendered are the render's
// objects, which say what each node renders. What the API server says of
// an object of such a node may quote the data, so it is withheld.
//
// This rule withholds messages only: a node that reads the graph's own
// Secrets may render any object (a Deployment refers to its password
// Secret), unlike one that holds a Secret input's data, which may render
// only Secrets.
func (k *Kind) SecretNode(o interface{ GetAnnotations() map[string]string }, rendered []*unstructured.Unstructured) string {
	n := k.nodeOf(o)
	switch {
	case n == nil:
		return ""
	case len(n.secretInput) > 0:
		return n.name
	}
	for _, d := range rendered {
		if isSecret(d) && slices.Contains(n.readsNodes, d.GetAnnotations()[v1alpha1.AnnotationGraphNode]) {
			return n.name
		}
	}
	return ""
}

// isSecret: o is a Secret, whose data is withheld from what a template
// that read it says.
func isSecret(o *unstructured.Unstructured) bool { return o.GroupVersionKind() == secretGVK }

// Templates is the version of the kind's templates: a digest of its
// folder, which any edit of a template changes.
func (k *Kind) Templates() string { return k.digest }

// Generates reports whether the kind's templates generate values (a chart
// kind's randAlphaNum, genCA, now, ...), which a render reads from and adds
// to the resource's [Generated].
func (k *Kind) Generates() bool { return k.generates }

// findCalls sets looksUp and generates, and the names of manifests (a
// chart kind's templates, under their names and Helm's) when it generates.
func (k *Kind) findCalls(manifests []string) {
	k.looksUp = k.chart != nil && calls(k.tmpl, "lookup")
	if k.generates = generates(k.tmpl); !k.generates {
		return
	}
	k.manifestNames = map[string]bool{}
	for _, file := range manifests {
		k.manifestNames[file] = true
		k.manifestNames[HelmTemplateName(k.chart.name(), file)] = true
	}
}

// Declaration returns the kind's declared types.
func (k *Kind) Declaration() Declaration { return k.declaration }

// WithLimits returns a copy of k that renders within l.
func (k *Kind) WithLimits(l Limits) *Kind {
	c := *k
	c.limits = l
	return &c
}

// execution is one render's run of a template set: a copy of the templates
// whose writes and count-driven functions are charged to a budget.
type execution struct {
	tmpl *template.Template
	b    *budget
	// values are a chart kind's .Values of valuesOf, computed once per
	// render.
	values   map[string]any
	valuesOf v1alpha1.Object
}

// executions is a pool of one template set's executions. Copies are reused:
// copying the templates' function maps on every render cost a sixth of the
// operator's allocations.
type executions struct {
	tmpl *template.Template
	pool sync.Pool
}

func newExecutions(t *template.Template) *executions { return &executions{tmpl: t} }

// get returns an execution of at most bytes (the limit named name) within
// l; put it back when done.
func (x *executions) get(l Limits, bytes int, name string) (*execution, error) {
	e, _ := x.pool.Get().(*execution)
	if e == nil {
		e = &execution{b: &budget{}}
		var err error
		if e.tmpl, err = metered(x.tmpl, e.b); err != nil {
			return nil, err
		}
	}
	e.b.reset(l, bytes, name)
	e.values, e.valuesOf = nil, nil
	return e, nil
}

func (x *executions) put(e *execution) { x.pool.Put(e) }

// within is decode's check for one template's output, after earlier ones
// made before objects: the objects limit, and the time.
func (e *execution) within(l Limits, before int) func(int) error {
	return func(decoded int) error {
		if before+decoded >= l.Objects+1 {
			return &LimitError{Limit: "rendered objects", Max: strconv.Itoa(l.Objects)}
		}
		return e.b.check()
	}
}

func (e *execution) execute(name string, data any) ([]byte, error) {
	w := &meteredWriter{b: e.b}
	defer e.b.writeTo(&w.Buffer, false)()
	e.b.data = data
	defer func() { e.b.data = nil }()
	// Errors read "template: <file>:<line>:<col>: executing ...".
	if err := e.tmpl.ExecuteTemplate(w, name, data); err != nil {
		return nil, withoutSites(err)
	}
	return w.Bytes(), nil
}

// Conversion is what a kind does between its versions (convert.go): the
// hub its templates read, the others, and the conversions between them.
type Conversion struct{ k *Kind }

// Conversion is k's conversion between its versions.
func (k *Kind) Conversion() Conversion { return Conversion{k} }

// Graph is a graph kind's nodes and inputs (plan.go, graph.go, nodes.go).
type Graph struct{ k *Kind }

// Graph is k's graph, nil when k declares no graph and no inputs.
func (k *Kind) Graph() *Graph {
	if k.graph == nil {
		return nil
	}
	return &Graph{k}
}

// Chart is a chart kind's chart (helm.go; see `stencil import chart`).
type Chart struct{ k *Kind }

// Chart is k's chart, nil when k is not a chart kind.
func (k *Kind) Chart() *Chart {
	if k.chart == nil {
		return nil
	}
	return &Chart{k}
}

// ownerGVK is the type the owned objects' ownerReferences name: the kind
// at its declared ownerVersion, else at its hub.
func (k *Kind) ownerGVK() schema.GroupVersionKind {
	gvk := k.def.GroupVersionKind
	if v := k.declaration.OwnerVersion; v != "" {
		gvk.Version = v
	}
	return gvk
}

// OwnerGroupVersionKind is the type the kind's objects' ownerReferences
// name: its ownerVersion when _kind.yaml declares one.
func (k *Kind) OwnerGroupVersionKind() schema.GroupVersionKind { return k.ownerGVK() }
