package kinds_test

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/internal/testing/samples"
)

// TestPropertyConversions: for every kind with several versions, random
// resources of each version, made from its CRD's schema, convert to every
// other version as a resource valid by that version's schema, and back to
// the resource they were (spoke → hub → spoke, hub → spoke → hub): what a
// version cannot hold survives in the annotation.
func TestPropertyConversions(t *testing.T) {
	seed := *propertySeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d, %d resources per version (-property.seed, -property.specs)", seed, *propertySpecs)
	p := newProperty(t)
	folders, err := samples.Folders("")
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, seed))
	converting := 0
	for _, f := range folders {
		k := f.Kind
		if k == nil || !k.Conversion().Converts() {
			continue
		}
		converting++
		for _, from := range k.Conversion().Versions() {
			gvk := k.GroupVersionKind()
			gvk.Version = from
			spec := p.specs[gvk]
			if spec == nil {
				t.Fatalf("no CRD schema for %s in config/crd/bases", gvk)
			}
			for range *propertySpecs {
				u := &unstructured.Unstructured{Object: map[string]any{"spec": randomValue(r, spec, 0)}}
				u.SetGroupVersionKind(gvk)
				u.SetName(randomName(r))
				u.SetNamespace(p.namespace)
				for _, to := range k.Conversion().Versions() {
					if to != from {
						roundTrip(t, p, k.GroupVersionKind().GroupKind().WithVersion(to), u, func(obj map[string]any, v string) (map[string]any, error) { return k.Conversion().Convert(obj, v) })
					}
				}
			}
		}
	}
	if converting == 0 {
		t.Fatal("no kind has several versions: the property is not exercised")
	}
}

// roundTrip converts u to the version of to, checks the result against its
// schema, and back.
func roundTrip(t *testing.T, p *property, to schema.GroupVersionKind, u *unstructured.Unstructured, convert func(map[string]any, string) (map[string]any, error)) {
	t.Helper()
	from := u.GroupVersionKind().Version
	there, err := convert(u.Object, to.Version)
	if err != nil {
		t.Fatalf("converting to %s: %v\n%s", to.Version, err, mustYAML(t, u.Object))
	}
	if err := p.validator.Validate(&unstructured.Unstructured{Object: there}); err != nil {
		t.Fatalf("%s → %s gives a resource %s refuses: %v\nfrom:\n%sto:\n%s", from, to.Version, to.Version, err, mustYAML(t, u.Object), mustYAML(t, there))
	}
	back, err := convert(there, from)
	if err != nil {
		t.Fatalf("converting back to %s: %v\n%s", from, err, mustYAML(t, there))
	}
	if !sameJSON(t, u.Object, back) {
		t.Fatalf("%s → %s → %s is not the resource it was:\nwas:\n%svia:\n%sis:\n%s", from, to.Version, from, mustYAML(t, u.Object), mustYAML(t, there), mustYAML(t, back))
	}
}

// sameJSON compares two objects as JSON: numbers by value.
func sameJSON(t *testing.T, a, b map[string]any) bool {
	t.Helper()
	norm := func(v map[string]any) any {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var out any
		if err := yaml.Unmarshal(data, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	return reflect.DeepEqual(norm(a), norm(b))
}
