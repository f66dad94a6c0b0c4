package kinds_test

import (
	"os"
	"slices"
	"testing"
	"testing/fstest"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/internal/operator/kinds"
	"github.com/stencil-operator/stencil/internal/testing/samples"
	"github.com/stencil-operator/stencil/render"
)

// TestRBACIsUpToDate fails when config/rbac/role.yaml is not what the kinds'
// declarations give: run `make manifests`.
func TestRBACIsUpToDate(t *testing.T) {
	want, err := samples.Set().ClusterRoleYAML("../../../config/crd/bases")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../../config/rbac/role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("config/rbac/role.yaml is out of date with the kinds' declarations; run `make manifests`")
	}
}

// TestRBACCoversEveryDeclaredType reads the committed role and checks that
// it lets the operator do its work on every type a kind declares.
func TestRBACCoversEveryDeclaredType(t *testing.T) {
	data, err := os.ReadFile("../../../config/rbac/role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	role := rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(data, &role); err != nil {
		t.Fatal(err)
	}
	allows := func(group, resource, verb string) bool {
		for _, r := range role.Rules {
			if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
				return true
			}
		}
		return false
	}
	loaded, err := samples.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range loaded {
		for _, ty := range k.Declaration().Owns {
			for _, verb := range []string{"get", "list", "watch", "create", "patch", "delete"} {
				if !allows(ty.GroupVersionKind().Group, ty.PluralResource(), verb) {
					t.Errorf("kind %s owns %s, but the role does not allow %s %s", k.GroupVersionKind().Kind, ty.Kind, verb, ty.PluralResource())
				}
			}
		}
		for _, ty := range k.Declaration().Observes {
			for _, verb := range []string{"get", "list", "watch"} {
				if !allows(ty.GroupVersionKind().Group, ty.PluralResource(), verb) {
					t.Errorf("kind %s observes %s, but the role does not allow %s %s", k.GroupVersionKind().Kind, ty.Kind, verb, ty.PluralResource())
				}
			}
		}
	}
	decorators, err := samples.LoadDecorators()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range decorators {
		decl := d.Declaration()
		for _, verb := range []string{"get", "list", "watch", "patch"} {
			if !allows(decl.Decorates.GroupVersionKind().Group, decl.Decorates.PluralResource(), verb) {
				t.Errorf("decorator %s decorates %s, but the role does not allow %s %s", d.Name(), decl.Decorates.Kind, verb, decl.Decorates.PluralResource())
			}
		}
		for _, ty := range decl.Owns {
			for _, verb := range []string{"get", "list", "watch", "create", "patch", "delete"} {
				if !allows(ty.GroupVersionKind().Group, ty.PluralResource(), verb) {
					t.Errorf("decorator %s owns %s, but the role does not allow %s %s", d.Name(), ty.Kind, verb, ty.PluralResource())
				}
			}
		}
		for _, ty := range decl.Observes {
			for _, verb := range []string{"get", "list", "watch"} {
				if !allows(ty.GroupVersionKind().Group, ty.PluralResource(), verb) {
					t.Errorf("decorator %s observes %s, but the role does not allow %s %s", d.Name(), ty.Kind, verb, ty.PluralResource())
				}
			}
		}
	}
}

// TestRBACNamesAParentsResourceAsItsCRDDoes: a decorator's parent is named
// as its CRD names it (plurals), in the rule that reads it and in the one
// that lets the decorator update its finalizers (blockOwnerDeletion).
func TestRBACNamesAParentsResourceAsItsCRDDoes(t *testing.T) {
	d, err := render.LoadDecorator("tags", fstest.MapFS{
		"_decorator.yaml": {Data: []byte("decorates: {apiVersion: example.com/v1, kind: Octopus}\nowns:\n- {apiVersion: v1, kind: ConfigMap}\n")},
		"configmap.yaml":  {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: tags\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	role := kinds.ClusterRole("op", nil, []*render.Decorator{d}, map[schema.GroupKind]string{{Group: "example.com", Kind: "Octopus"}: "octopi"})
	var resources []string
	for _, r := range role.Rules {
		if slices.Contains(r.APIGroups, "example.com") {
			resources = append(resources, r.Resources...)
		}
	}
	for _, want := range []string{"octopi", "octopi/finalizers"} {
		if !slices.Contains(resources, want) {
			t.Errorf("the role's resources of example.com are %v, want %s among them", resources, want)
		}
	}
	if slices.Contains(resources, "octopuses/finalizers") {
		t.Errorf("the role names octopuses/finalizers, a resource the CRD does not declare")
	}
}
