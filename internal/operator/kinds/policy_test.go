package kinds_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/internal/operator/kinds"
	"github.com/stencil-operator/stencil/internal/testing/samples"
	"github.com/stencil-operator/stencil/render"
)

// TestPolicyIsUpToDate fails when config/policy/graph_deletion.yaml is not
// what the kinds' declarations give: run `make manifests`.
func TestPolicyIsUpToDate(t *testing.T) {
	want, err := samples.Set().GraphDeletionPolicyYAML("../../../config/crd/bases")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../../config/policy/graph_deletion.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatal("config/policy/graph_deletion.yaml is out of date with the kinds' declarations; run `make manifests`")
	}
}

// TestPolicyMatchesGraphKindsOnly: the policy matches the DELETEs of the
// graph kinds' resources, and of no other kind's; without a graph kind the
// file holds no object (kustomize takes it as it is).
func TestPolicyMatchesGraphKindsOnly(t *testing.T) {
	loaded, err := samples.Load()
	if err != nil {
		t.Fatal(err)
	}
	plurals, err := kinds.CRDPlurals("../../../config/crd/bases")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		// keep picks the kinds the policy is made from.
		keep func(*render.Kind) bool
		// want is the resources matched, as group/resource; nil: no policy.
		want []string
	}{
		{name: "the shipped kinds", keep: func(*render.Kind) bool { return true }, want: []string{"stacks.stencil.dev/appstacks"}},
		{name: "no graph kind", keep: func(k *render.Kind) bool { return k.Graph() == nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := kinds.GraphDeletionPolicyYAML("stencil", slices.DeleteFunc(slices.Clone(loaded), func(k *render.Kind) bool { return !tt.keep(k) }), plurals)
			if err != nil {
				t.Fatal(err)
			}
			policy := admissionv1.ValidatingAdmissionPolicy{}
			if err := yaml.Unmarshal([]byte(strings.Split(string(out), "\n---\n")[0]), &policy); err != nil {
				t.Fatal(err)
			}
			var got []string
			if c := policy.Spec.MatchConstraints; c != nil {
				for _, r := range c.ResourceRules {
					if !slices.Equal(r.Operations, []admissionv1.OperationType{admissionv1.Delete}) {
						t.Errorf("rule %v: operations %v, want DELETE only", r.Resources, r.Operations)
					}
					for _, res := range r.Resources {
						got = append(got, r.APIGroups[0]+"/"+res)
					}
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("matches %v, want %v", got, tt.want)
			}
			if tt.want == nil && strings.Contains(string(out), "\nkind: ") {
				t.Errorf("an object without a graph kind:\n%s", out)
			}
		})
	}
}
