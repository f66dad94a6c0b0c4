package schema_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/render/schema"
)

// TestValidate: each case is an object and the problems the validator must
// report (each a substring of one problem), or none.
func TestValidate(t *testing.T) {
	const deployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default, labels: {app: web}}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx, ports: [{containerPort: 80}]}]
`
	tests := []struct {
		name, object string
		want         []string
	}{
		{"valid deployment", deployment, nil},
		{"a typo in a field name", `apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: default}
spec: {maxUnavailabel: 1, selector: {matchLabels: {app: web}}}
`, []string{".spec.maxUnavailabel: field not declared in schema"}},
		{"every unknown field at once, each by its full path", strings.NewReplacer(
			"spec:\n  selector", "spec:\n  selectr: {}\n  selector",
			"{name: web, image: nginx, ports: [{containerPort: 80}]}", "{name: web, image: nginx, ports: [{containerPort: 80}]}, {name: b, image: nginx, imagePullPolcy: Always, ports: [{containerPort: 81, prot: TCP}]}",
		).Replace(deployment), []string{
			".spec.selectr: field not declared in schema",
			".spec.template.spec.containers[1].imagePullPolcy: field not declared in schema",
			".spec.template.spec.containers[1].ports[0].prot: field not declared in schema",
		}},
		{"a string where a number goes", strings.Replace(deployment, "spec:\n  selector", "spec:\n  replicas: \"3\"\n  selector", 1),
			[]string{".spec.replicas: expected numeric"}},
		{"a missing required field", strings.Replace(deployment, "  selector: {matchLabels: {app: web}}\n", "", 1),
			[]string{".spec.selector: Required value"}},
		{"a missing required field in a list item", strings.Replace(deployment, "ports: [{containerPort: 80}]", "ports: [{name: http}]", 1),
			[]string{".spec.template.spec.containers[0].ports[0].containerPort: Required value"}},
		{"a missing container name", strings.Replace(deployment, "{name: web, image: nginx", "{image: nginx", 1),
			[]string{".spec.template.spec.containers[0].name: Required value"}},
		{"an invalid label value", strings.Replace(deployment, "labels: {app: web}}\nspec", "labels: {app: \"not valid!\"}}\nspec", 1),
			[]string{".metadata.labels: Invalid value"}},
		{"an RBAC name with a colon", `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:web-reader"}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get]}]
`, nil},
		{"a colon where a subdomain goes", `apiVersion: v1
kind: ConfigMap
metadata: {name: "system:web", namespace: default}
`, []string{".metadata.name: Invalid value"}},
		{"an invalid name", `apiVersion: v1
kind: Service
metadata: {name: web.example, namespace: default}
spec: {ports: [{port: 80}]}
`, []string{".metadata.name: Invalid value"}},
		{"an optional field without omitempty", `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny, namespace: default}
spec: {policyTypes: [Ingress]}
`, nil},
		{"a valid custom resource", `apiVersion: operator.k8s-summit.org/v1
kind: MyWeb
metadata: {name: web, namespace: default}
spec: {image: nginx, nodePortNumber: 30100}
`, nil},
		{"a custom resource with an unknown field", `apiVersion: operator.k8s-summit.org/v1
kind: MyWeb
metadata: {name: web, namespace: default}
spec: {image: nginx, nodePortNumber: 30100, nodePortNumbr: 1}
`, []string{".spec.nodePortNumbr: field not declared in schema"}},
		{"a custom resource's unknown fields, all of them", `apiVersion: operator.k8s-summit.org/v1
kind: MyWeb
metadata: {name: web, namespace: default}
spec: {image: nginx, nodePortNumber: 30100, nodePortNumbr: 1, imag: x}
`, []string{".spec.nodePortNumbr: field not declared in schema", ".spec.imag: field not declared in schema"}},
		{"a custom resource out of bounds", `apiVersion: operator.k8s-summit.org/v1
kind: MyWeb
metadata: {name: web, namespace: default}
spec: {image: nginx, nodePortNumber: 20}
`, []string{".spec.nodePortNumber: should be greater than or equal to 30000"}},
	}
	v := validator(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := v.Validate(object(t, tt.object))
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("refused a valid object: %v", err)
				}
				return
			}
			if _, ok := errors.AsType[*schema.Error](err); !ok {
				t.Fatalf("want a *schema.Error naming %q, got %v", tt.want, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("problems do not name %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestValidateUnknownType(t *testing.T) {
	err := validator(t).Validate(object(t, "apiVersion: example.com/v1\nkind: Thing\nmetadata: {name: x, namespace: default}\n"))
	if !errors.Is(err, schema.ErrNoSchema) {
		t.Fatalf("want ErrNoSchema, got %v", err)
	}
}

func validator(t *testing.T) *schema.Validator {
	t.Helper()
	data, err := os.ReadFile("../../config/crd/bases/operator.k8s-summit.org_mywebs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		t.Fatal(err)
	}
	v, err := schema.New(crd)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func object(t *testing.T, src string) *unstructured.Unstructured {
	t.Helper()
	o := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(src), &o.Object); err != nil {
		t.Fatal(err)
	}
	return o
}

// TestValidateAppliesDefaults: a field both required and defaulted (what
// kubebuilder writes for a field without omitempty that has a default) may
// be absent, as the API server defaults it before validating.
func TestValidateAppliesDefaults(t *testing.T) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal([]byte(`
spec:
  group: example.com
  names: {kind: Thing}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [replicas]
            properties:
              replicas: {type: integer, default: 1, minimum: 1}
`), crd); err != nil {
		t.Fatal(err)
	}
	v, err := schema.New(crd)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Validate(object(t, "apiVersion: example.com/v1\nkind: Thing\nmetadata: {name: x, namespace: d}\nspec: {}\n")); err != nil {
		t.Errorf("a defaulted required field, absent: %v", err)
	}
	if err := v.Validate(object(t, "apiVersion: example.com/v1\nkind: Thing\nmetadata: {name: x, namespace: d}\nspec: {replicas: 0}\n")); err == nil {
		t.Error("replicas 0 under a minimum of 1 was accepted")
	}
}
