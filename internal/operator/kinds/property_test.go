package kinds_test

import (
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp/syntax"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/internal/operator/kinds"
	"github.com/stencil-operator/stencil/internal/testing/samples"
	"github.com/stencil-operator/stencil/render"
	"github.com/stencil-operator/stencil/render/kindtest"
	renderschema "github.com/stencil-operator/stencil/render/schema"
)

var (
	propertySpecs = flag.Int("property.specs", 200, "Random custom resources per kind (and parents per decorator) in TestPropertyKinds.")
	propertySeed  = flag.Uint64("property.seed", 1, "Seed of TestPropertyKinds' random resources (0: from the clock; the test logs it).")
)

// TestPropertyKinds renders random resources of every kind, made from its
// CRD's schema and accepted by the API server (a dry-run create: the CRD's
// OpenAPI and CEL rules, defaults applied), and random parents of every
// decorator. For each: the render succeeds; every object is valid offline
// (render/schema) and by the API server (a dry-run server-side apply); it
// stays in the resource's namespace (or is of a declared cluster-scoped
// type) and carries stencil's ownership labels. A failure prints the
// resource, which is a bug in the kind (or in render/schema, when the two
// validations disagree).
func TestPropertyKinds(t *testing.T) {
	seed := *propertySeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d, %d resources per kind (-property.seed, -property.specs)", seed, *propertySpecs)
	p := newProperty(t)
	folders, err := samples.Folders("")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range folders {
		t.Run(f.Name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, hashOf(f.Name)))
			accepted, refused := 0, 0
			p.inputRefusals = 0
			for range *propertySpecs {
				var ok bool
				if f.Kind != nil {
					ok = p.kindOnce(t, r, f.Kind)
				} else {
					ok = p.decoratorOnce(t, r, f)
				}
				if ok {
					accepted++
				} else {
					refused++
				}
			}
			checked := accepted - p.inputRefusals
			t.Logf("%d accepted by the API server and checked, %d refused by a template for their random inputs, %d refused by the API server", checked, p.inputRefusals, refused)
			// A template may refuse an input with a clear message (fail:
			// two keys that make one variable), but not most of them.
			if p.inputRefusals > *propertySpecs/20 {
				t.Errorf("the templates refused (fail) the random inputs of %d of %d resources: valid inputs must render", p.inputRefusals, *propertySpecs)
			}
			if checked < *propertySpecs/4 {
				t.Errorf("only %d of %d random resources were valid: the generator misses the schema", checked, *propertySpecs)
			}
		})
	}
}

// FuzzKinds is TestPropertyKinds for longer runs: one random resource per
// kind and decorator from each fuzzed seed.
//
//	go test ./internal/operator/kinds -run '^$' -fuzz FuzzKinds -fuzztime 10m
func FuzzKinds(f *testing.F) {
	f.Add(uint64(1), uint64(2))
	folders, err := samples.Folders("")
	if err != nil {
		f.Fatal(err)
	}
	var p *property
	f.Fuzz(func(t *testing.T, a, b uint64) {
		if p == nil {
			p = newProperty(t)
		}
		r := rand.New(rand.NewPCG(a, b))
		for _, folder := range folders {
			if folder.Kind != nil {
				p.kindOnce(t, r, folder.Kind)
			} else {
				p.decoratorOnce(t, r, folder)
			}
		}
	})
}

// property holds what every check needs: the validator, the kinds' spec
// schemas, and a namespace for the dry runs.
type property struct {
	// inputRefusals counts the graph renders a template refused for their
	// random inputs (a fail call).
	inputRefusals int
	client        client.Client
	validator     *renderschema.Validator
	specs         map[schema.GroupVersionKind]*structuralschema.Structural
	namespace     string
}

func newProperty(t *testing.T) *property {
	t.Helper()
	files, err := filepath.Glob("../../../config/crd/bases/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := &property{specs: map[schema.GroupVersionKind]*structuralschema.Structural{}, namespace: "property"}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, crd); err != nil {
			t.Fatal(err)
		}
		crds = append(crds, crd)
		for _, v := range crd.Spec.Versions {
			internal := &apiextensionsinternal.JSONSchemaProps{}
			if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, internal, nil); err != nil {
				t.Fatal(err)
			}
			s, err := structuralschema.NewStructural(internal)
			if err != nil {
				t.Fatal(err)
			}
			spec := s.Properties["spec"]
			p.specs[schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}] = &spec
		}
	}
	if p.validator, err = renderschema.New(crds...); err != nil {
		t.Fatal(err)
	}
	// Thousands of dry runs: a client without the default rate limit.
	cfg := rest.CopyConfig(cluster.Config)
	cfg.QPS, cfg.Burst = 1000, 1000
	if p.client, err = client.New(cfg, client.Options{Scheme: k8s.Scheme()}); err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.namespace}}
	if err := p.client.Create(t.Context(), ns); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	return p
}

// kindOnce makes one random resource of k; when the API server accepts it,
// checks its render. It reports whether the server accepted it.
func (p *property) kindOnce(t *testing.T, r *rand.Rand, k *render.Kind) bool {
	t.Helper()
	gvk := k.GroupVersionKind()
	spec := p.specs[gvk]
	if spec == nil {
		t.Fatalf("no CRD for %s in config/crd/bases", gvk)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": randomValue(r, spec, 0)}}
	u.SetGroupVersionKind(gvk)
	u.SetName(randomName(r))
	u.SetNamespace(p.namespace)
	if err := p.client.Create(t.Context(), u, client.DryRunAll); err != nil {
		return false // not valid by the CRD: not the templates' concern
	}
	u.SetUID(types.UID(fmt.Sprintf("%08x-0000-4000-8000-%012x", r.Uint32(), r.Uint64()&0xffffffffffff)))
	cr := k.New()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, cr); err != nil {
		t.Fatalf("the API server's %s does not fit the Go type: %v", gvk.Kind, err)
	}
	var objs []*unstructured.Unstructured
	var err error
	if k.Graph() != nil {
		// Rendered as it converges, over random inputs.
		var refused bool
		if objs, refused, err = convergeGraph(r, k, cr, p.validator); refused {
			p.inputRefusals++
			return true
		}
	} else {
		objs, err = k.RenderValidated(cr, p.validator)
	}
	clusterScoped := map[schema.GroupVersionKind]bool{}
	for _, ref := range k.Declaration().Owns {
		clusterScoped[ref.GroupVersionKind()] = ref.ClusterScoped
	}
	p.check(t, u, objs, err, func(o *unstructured.Unstructured) bool { return clusterScoped[o.GroupVersionKind()] })
	return true
}

// decoratorOnce takes a random one of the decorator's template tests and
// gives its parent a random name, labels and annotations (its observed
// objects follow); when the API server accepts the parent, checks the
// render.
func (p *property) decoratorOnce(t *testing.T, r *rand.Rand, f kinds.Folder) bool {
	t.Helper()
	cases, err := kindtest.Cases(f.FS)
	if err != nil || len(cases) == 0 {
		t.Fatalf("%s has no template tests to start from: %v", f.Name, err)
	}
	c := cases[r.IntN(len(cases))]
	parent := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(c.Files[kindtest.InputFile], &parent.Object); err != nil {
		t.Fatal(err)
	}
	name := randomName(r)
	if parent.GetNamespace() != "" {
		parent.SetNamespace(p.namespace)
	} else if len(name) > 63 || strings.Contains(name, ".") {
		name = name[:min(len(name), 20)]
		name = strings.Trim(strings.ReplaceAll(name, ".", "-"), "-") + "x"
	}
	parent.SetName(name)
	labels := parent.GetLabels()
	for range r.IntN(4) {
		labels[randomLabelKey(r)] = randomLabelValue(r)
	}
	parent.SetLabels(labels)
	ann := map[string]string{}
	for range r.IntN(3) {
		ann[randomLabelKey(r)] = randomString(r, 0, 40)
	}
	parent.SetAnnotations(ann)
	check := parent.DeepCopy()
	check.SetUID("")
	if err := p.client.Create(t.Context(), check, client.DryRunAll); err != nil {
		return false
	}
	c.Files = map[string][]byte{kindtest.InputFile: mustYAML(t, parent.Object), kindtest.ObservedFile: c.Files[kindtest.ObservedFile]}
	out := kindtest.RunDecorator(f.Decorator, c, p.validator)
	var objs []*unstructured.Unstructured
	if out.Err == nil {
		objs = decodeStream(t, out.Got)
	}
	p.check(t, parent, objs, out.Err, func(*unstructured.Unstructured) bool { return false })
	return true
}

// check fails t, naming the resource, when its render failed or an object
// breaks a rule; each object is also applied with a dry run, which the API
// server must accept.
func (p *property) check(t *testing.T, res *unstructured.Unstructured, objs []*unstructured.Unstructured, renderErr error, clusterScoped func(*unstructured.Unstructured) bool) {
	t.Helper()
	shown := map[string]any{"apiVersion": res.GetAPIVersion(), "kind": res.GetKind(), "metadata": map[string]any{"name": res.GetName(), "namespace": res.GetNamespace(), "labels": res.GetLabels()}, "spec": res.Object["spec"]}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("%s\nfor this resource, accepted by the API server:\n%s", fmt.Sprintf(format, args...), mustYAML(t, shown))
	}
	if renderErr != nil {
		fail("the render failed: %v", renderErr)
		return
	}
	for _, o := range objs {
		if o.GroupVersionKind() == res.GroupVersionKind() && o.GetName() == res.GetName() {
			continue // a decorator's patch of its parent
		}
		switch ns := o.GetNamespace(); {
		case clusterScoped(o) && ns != "":
			fail("%s %s: a cluster-scoped type in namespace %q", o.GetKind(), o.GetName(), ns)
		case !clusterScoped(o) && ns != res.GetNamespace() && res.GetNamespace() != "":
			fail("%s %s: in namespace %q, not the resource's", o.GetKind(), o.GetName(), ns)
		}
		if o.GetLabels()[v1alpha1.LabelManagedBy] != v1alpha1.ManagedByStencil || o.GetLabels()[v1alpha1.LabelOwnerUID] != string(res.GetUID()) {
			fail("%s %s: labels %v lack stencil's ownership labels", o.GetKind(), o.GetName(), o.GetLabels())
		}
		applied := o.DeepCopy()
		applied.SetOwnerReferences(nil) // the owner does not exist: the resource was a dry run
		if applied.GetNamespace() != "" {
			applied.SetNamespace(p.namespace)
		}
		err := p.client.Apply(t.Context(), client.ApplyConfigurationFromUnstructured(applied), client.DryRunAll, client.FieldOwner("property-test"), client.ForceOwnership)
		if err != nil && !allocatedElsewhere(err) {
			fail("%s %s: valid offline, refused by the API server: %v", o.GetKind(), o.GetName(), err)
		}
	}
}

// allocatedElsewhere tells a refusal about the cluster's state, not the
// object: a node port or cluster IP that a real Service in the shared test
// cluster holds (the seed MyWeb's 30100, while the garbage collector still
// deletes it). The same object is valid on a cluster without that Service.
func allocatedElsewhere(err error) bool {
	return apierrors.IsInvalid(err) && strings.Contains(err.Error(), "is already allocated")
}

// randomValue is a random value of schema s: required properties always,
// others half the time; enums, bounds, lengths and patterns kept, and edge
// values and awkward strings favoured.
func randomValue(r *rand.Rand, s *structuralschema.Structural, depth int) any {
	vv := s.ValueValidation
	if vv == nil {
		vv = &structuralschema.ValueValidation{}
	}
	if len(vv.Enum) > 0 {
		return vv.Enum[r.IntN(len(vv.Enum))].Object
	}
	switch s.Type {
	case "object":
		out := map[string]any{}
		for name, prop := range s.Properties {
			if slices.Contains(vv.Required, name) || (depth < 4 && r.IntN(2) == 0) {
				out[name] = randomValue(r, &prop, depth+1)
			}
		}
		return out
	case "array":
		var out []any
		if s.Items != nil && depth < 4 {
			for range r.IntN(4) {
				out = append(out, randomValue(r, s.Items, depth+1))
			}
		}
		return out
	case "boolean":
		return r.IntN(2) == 0
	case "integer":
		lo, hi := int64(-5), int64(1000)
		if vv.Minimum != nil {
			lo = int64(*vv.Minimum)
		}
		if vv.Maximum != nil {
			hi = int64(*vv.Maximum)
		}
		switch r.IntN(4) {
		case 0:
			return lo
		case 1:
			return hi
		}
		return lo + r.Int64N(hi-lo+1)
	case "number":
		return r.Float64() * 100
	case "string":
		minLen, maxLen := 0, 40
		if vv.MinLength != nil {
			minLen = int(*vv.MinLength)
		}
		if vv.MaxLength != nil {
			maxLen = min(int(*vv.MaxLength), 300)
		}
		if vv.Pattern != "" {
			if v, ok := fromPattern(r, vv.Pattern, minLen, maxLen); ok {
				return v
			}
		}
		return randomString(r, minLen, maxLen)
	}
	return nil
}

// awkward are strings that YAML or a template reads otherwise than as the
// string they are, or that break a name.
var awkward = []string{"123", "on", "off", "null", "true", "~", "1e3", "0x1f", "-", "a b", "a: b", "{{ .Name }}", "'", "\"", "#x", "é", "a\nb", "  x", "x  ", "- x", "[x]", "{x}", "*x", "&x", "!x", "%x", "@x", "`x`", "|", ">", "web"}

func randomString(r *rand.Rand, minLen, maxLen int) string {
	var s string
	switch r.IntN(3) {
	case 0:
		s = awkward[r.IntN(len(awkward))]
	case 1:
		s = randomDNS(r, 1+r.IntN(12))
	default:
		const chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/ ,'\"{}[]#&*!|>%@`\n\té✓"
		runes := []rune(chars)
		var b strings.Builder
		for range r.IntN(maxLen + 1) {
			b.WriteRune(runes[r.IntN(len(runes))])
		}
		s = b.String()
	}
	for len([]rune(s)) < minLen {
		s += "x"
	}
	if rs := []rune(s); len(rs) > maxLen {
		s = string(rs[:maxLen])
	}
	return s
}

// randomDNS is a DNS-1123 label-like string of about n characters.
func randomDNS(r *rand.Rand, n int) string {
	const alnum, inner = "abcdefghijklmnopqrstuvwxyz0123456789", "abcdefghijklmnopqrstuvwxyz0123456789-"
	b := []byte{alnum[r.IntN(len(alnum))]}
	for i := 1; i < n; i++ {
		if i == n-1 {
			b = append(b, alnum[r.IntN(len(alnum))])
		} else {
			b = append(b, inner[r.IntN(len(inner))])
		}
	}
	return string(b)
}

// randomName is a resource name the API server may accept: short, a
// lookalike of another YAML type, as long as a label may be, or a dotted
// subdomain.
func randomName(r *rand.Rand) string {
	switch r.IntN(10) {
	case 0, 1:
		return []string{"123", "on", "off", "null", "true", "y", "1e3", "0x1f", "007"}[r.IntN(9)]
	case 2:
		return randomDNS(r, 50+r.IntN(14))
	case 3:
		return randomDNS(r, 1+r.IntN(20)) + "." + randomDNS(r, 1+r.IntN(20))
	case 4:
		return randomDNS(r, 40+r.IntN(23)) + "." + randomDNS(r, 40+r.IntN(23)) // longer than a label value
	}
	return randomDNS(r, 1+r.IntN(12))
}

func randomLabelKey(r *rand.Rand) string {
	if r.IntN(2) == 0 {
		return randomDNS(r, 1+r.IntN(8)) + ".example.com/" + randomDNS(r, 1+r.IntN(10))
	}
	return randomDNS(r, 1+r.IntN(10))
}

func randomLabelValue(r *rand.Rand) string {
	if r.IntN(5) == 0 {
		return ""
	}
	return randomDNS(r, 1+r.IntN(20))
}

// fromPattern is a random string matching the regular expression pattern,
// with a length in [minLen, maxLen], when a few tries find one.
func fromPattern(r *rand.Rand, pattern string, minLen, maxLen int) (string, bool) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return "", false
	}
	re = re.Simplify()
	for range 20 {
		var b strings.Builder
		generate(r, re, &b)
		if n := len([]rune(b.String())); n >= minLen && n <= maxLen {
			return b.String(), true
		}
	}
	return "", false
}

func generate(r *rand.Rand, re *syntax.Regexp, b *strings.Builder) {
	switch re.Op {
	case syntax.OpLiteral:
		b.WriteString(string(re.Rune))
	case syntax.OpCharClass:
		b.WriteRune(fromClass(r, re.Rune))
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		b.WriteRune(rune('!' + r.IntN(94)))
	case syntax.OpCapture:
		generate(r, re.Sub[0], b)
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			generate(r, sub, b)
		}
	case syntax.OpAlternate:
		generate(r, re.Sub[r.IntN(len(re.Sub))], b)
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		lo, hi := 0, 6
		switch re.Op {
		case syntax.OpPlus:
			lo = 1
		case syntax.OpQuest:
			hi = 1
		case syntax.OpRepeat:
			lo, hi = re.Min, re.Max
			if hi < 0 {
				hi = lo + 6
			}
		}
		for range lo + r.IntN(hi-lo+1) {
			generate(r, re.Sub[0], b)
		}
	}
}

// fromClass picks a rune of a character class (pairs of ranges), printable
// ASCII when the class has some.
func fromClass(r *rand.Rand, ranges []rune) rune {
	var ascii []rune
	for i := 0; i+1 < len(ranges); i += 2 {
		for c := max(ranges[i], '!'); c <= min(ranges[i+1], '~'); c++ {
			ascii = append(ascii, c)
		}
	}
	if len(ascii) > 0 {
		return ascii[r.IntN(len(ascii))]
	}
	i := 2 * r.IntN(len(ranges)/2)
	return ranges[i]
}

func hashOf(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return h.Sum64()
}

func mustYAML(t *testing.T, v any) []byte {
	t.Helper()
	out, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func decodeStream(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for doc := range strings.SplitSeq(string(data), "\n---\n") {
		o := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatal(err)
		}
		if len(o) > 0 {
			out = append(out, &unstructured.Unstructured{Object: o})
		}
	}
	return out
}
