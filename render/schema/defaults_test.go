package schema_test

import (
	"errors"
	"reflect"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/render/schema"
)

// defaultingCRD declares a default at each place the API server applies
// one: a field, a field of an object that is itself defaulted, list items,
// map values, and nullable and non-nullable fields.
const defaultingCRD = `
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
            properties:
              image: {type: string, default: nginx}
              port: {type: integer, default: 80}
              service:
                type: object
                default: {}
                properties:
                  type: {type: string, default: ClusterIP}
              probe:
                type: object
                properties:
                  path: {type: string, default: /healthz}
              note: {type: string, nullable: true, default: none}
              comment: {type: string}
              containers:
                type: array
                items:
                  type: object
                  properties:
                    pullPolicy: {type: string, default: IfNotPresent}
              limits:
                type: object
                additionalProperties:
                  type: object
                  properties:
                    unit: {type: string, default: Mi}
`

// TestDefault: each case is a custom resource's spec and the spec the API
// server would store (the cases of apiextensions-apiserver's own defaulting
// tests, on one schema).
func TestDefault(t *testing.T) {
	tests := []struct {
		name string
		// spec is the resource's spec as written.
		spec string
		// want is the spec once defaulted.
		want string
	}{
		{"empty spec: every defaulted field, and an object defaulted to {} gets its fields' defaults",
			`{}`, `{image: nginx, port: 80, service: {type: ClusterIP}, note: none}`},
		{"given fields stay",
			`{image: httpd, port: 8080, service: {type: NodePort}, note: x}`, `{image: httpd, port: 8080, service: {type: NodePort}, note: x}`},
		{"an absent object without a default stays absent",
			`{image: a}`, `{image: a, port: 80, service: {type: ClusterIP}, note: none}`},
		{"a present object gets its fields' defaults",
			`{probe: {}}`, `{image: nginx, port: 80, service: {type: ClusterIP}, note: none, probe: {path: /healthz}}`},
		{"a non-nullable null with a default is defaulted",
			`{image: null}`, `{image: nginx, port: 80, service: {type: ClusterIP}, note: none}`},
		{"a non-nullable null without a default is dropped",
			`{comment: null}`, `{image: nginx, port: 80, service: {type: ClusterIP}, note: none}`},
		{"a nullable null stays null",
			`{note: null}`, `{image: nginx, port: 80, service: {type: ClusterIP}, note: null}`},
		{"list items",
			`{containers: [{}, {pullPolicy: Always}]}`, `{image: nginx, port: 80, service: {type: ClusterIP}, note: none, containers: [{pullPolicy: IfNotPresent}, {pullPolicy: Always}]}`},
		{"map values",
			`{limits: {memory: {}}}`, `{image: nginx, port: 80, service: {type: ClusterIP}, note: none, limits: {memory: {unit: Mi}}}`},
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal([]byte(defaultingCRD), crd); err != nil {
		t.Fatal(err)
	}
	v, err := schema.New(crd)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := object(t, "apiVersion: example.com/v1\nkind: Thing\nmetadata: {name: x, namespace: d}\nspec: "+tt.spec+"\n")
			if err := v.Default(o); err != nil {
				t.Fatal(err)
			}
			want := map[string]any{}
			if err := yaml.Unmarshal([]byte(tt.want), &want); err != nil {
				t.Fatal(err)
			}
			got, _ := yaml.Marshal(o.Object["spec"])
			wantYAML, _ := yaml.Marshal(want)
			if !reflect.DeepEqual(got, wantYAML) {
				t.Errorf("spec defaulted to\n%s\nwant\n%s", got, wantYAML)
			}
		})
	}
}

func TestDefaultUnknownType(t *testing.T) {
	err := validator(t).Default(object(t, "apiVersion: example.com/v1\nkind: Thing\nmetadata: {name: x, namespace: default}\n"))
	if !errors.Is(err, schema.ErrNoSchema) {
		t.Fatalf("want ErrNoSchema, got %v", err)
	}
}
