package chartimport

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
	"sigs.k8s.io/yaml"
)

func TestSpecSchema(t *testing.T) {
	tests := []struct {
		name string
		// values is the chart's values.yaml.
		values string
		// jsonSchema is its values.schema.json, "" for none.
		jsonSchema string
		// want is the YAML of the spec schema SpecSchema returns.
		want string
		// wantNotes are its notes, in order.
		wantNotes []string
	}{{
		name:   "no values: an object that keeps any key",
		values: ``,
		want: `
default: {}
type: object
x-kubernetes-preserve-unknown-fields: true
`,
	}, {
		name: "nested defaults: the parent's default is its whole value",
		values: `
probe:
  initialDelaySeconds: 10
`,
		want: `
default:
  probe:
    initialDelaySeconds: 10
properties:
  probe:
    default:
      initialDelaySeconds: 10
    nullable: true
    properties:
      initialDelaySeconds:
        default: 10
        nullable: true
        type: integer
    type: object
    x-kubernetes-preserve-unknown-fields: true
type: object
x-kubernetes-preserve-unknown-fields: true
`,
	}, {
		name: "scalars: a whole number is an integer, others numbers",
		values: `
replicas: 1
ratio: 0.5
whole: 2.0
enabled: false
name: web
`,
		want: `
default:
  enabled: false
  name: web
  ratio: 0.5
  replicas: 1
  whole: 2
properties:
  enabled:
    default: false
    nullable: true
    type: boolean
  name:
    default: web
    nullable: true
    type: string
  ratio:
    default: 0.5
    nullable: true
    type: number
  replicas:
    default: 1
    nullable: true
    type: integer
  whole:
    default: 2
    nullable: true
    type: integer
type: object
x-kubernetes-preserve-unknown-fields: true
`,
	}, {
		name: "empty and null values, Kubernetes keys: free-form",
		values: `
affinity: {}
resources:
  limits:
    cpu: 100m
serviceLabels:
  tier: web
tolerations: []
config: {}
extraArgs: []
tag: null
`,
		want: `
default:
  affinity: {}
  config: {}
  extraArgs: []
  resources:
    limits:
      cpu: 100m
  serviceLabels:
    tier: web
  tolerations: []
properties:
  affinity:
    default: {}
    nullable: true
    type: object
    x-kubernetes-preserve-unknown-fields: true
  config:
    default: {}
    nullable: true
    type: object
    x-kubernetes-preserve-unknown-fields: true
  extraArgs:
    default: []
    items:
      x-kubernetes-preserve-unknown-fields: true
    nullable: true
    type: array
  resources:
    default:
      limits:
        cpu: 100m
    nullable: true
    type: object
    x-kubernetes-preserve-unknown-fields: true
  serviceLabels:
    default:
      tier: web
    nullable: true
    type: object
    x-kubernetes-preserve-unknown-fields: true
  tag:
    nullable: true
    x-kubernetes-preserve-unknown-fields: true
  tolerations:
    default: []
    items:
      x-kubernetes-preserve-unknown-fields: true
    nullable: true
    type: array
type: object
x-kubernetes-preserve-unknown-fields: true
`,
		wantNotes: []string{
			"spec.affinity: free-form: affinity is a Kubernetes type the chart passes through",
			"spec.config: free-form: its default is {}",
			"spec.extraArgs: free-form items: its default is []",
			"spec.resources: free-form: resources is a Kubernetes type the chart passes through",
			"spec.serviceLabels: free-form: serviceLabels is a Kubernetes type the chart passes through",
			"spec.tag: free-form: its default is null",
			"spec.tolerations: free-form: tolerations is a Kubernetes type the chart passes through",
		},
	}, {
		name: "lists: scalars of one type give items a type, objects do not",
		values: `
hosts: [a.example.com, b.example.com]
weights: [1, 2.5]
mixed: [a, 1]
ports:
- name: http
  port: 80
`,
		want: `
default:
  hosts: [a.example.com, b.example.com]
  mixed: [a, 1]
  ports:
  - name: http
    port: 80
  weights: [1, 2.5]
properties:
  hosts:
    default: [a.example.com, b.example.com]
    items:
      type: string
    nullable: true
    type: array
  mixed:
    default: [a, 1]
    items:
      x-kubernetes-preserve-unknown-fields: true
    nullable: true
    type: array
  ports:
    default:
    - name: http
      port: 80
    items:
      x-kubernetes-preserve-unknown-fields: true
    nullable: true
    type: array
  weights:
    default: [1, 2.5]
    items:
      type: number
    nullable: true
    type: array
type: object
x-kubernetes-preserve-unknown-fields: true
`,
		wantNotes: []string{
			"spec.mixed: free-form items: its elements are not scalars of one type",
			"spec.ports: free-form items: its elements are not scalars of one type",
		},
	}, {
		name: "schema: $refs inlined, keys the schema lacks inferred",
		values: `
image:
  repository: nginx
db:
  port: 5432
debug: false
`,
		jsonSchema: `{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "title": "Values",
  "type": "object",
  "properties": {
    "image": {"$ref": "#/definitions/image", "description": "The web server's image."},
    "db": {"$ref": "#/$defs/db"}
  },
  "definitions": {
    "image": {"type": "object", "properties": {"repository": {"type": "string", "minLength": 1}}}
  },
  "$defs": {
    "db": {"type": "object", "properties": {"port": {"type": "integer", "minimum": 1, "maximum": 65535}}}
  }
}`,
		want: `
default:
  db:
    port: 5432
  debug: false
  image:
    repository: nginx
properties:
  db:
    default:
      port: 5432
    nullable: true
    properties:
      port:
        default: 5432
        maximum: 65535
        minimum: 1
        nullable: true
        type: integer
    type: object
    x-kubernetes-preserve-unknown-fields: true
  debug:
    default: false
    nullable: true
    type: boolean
  image:
    default:
      repository: nginx
    description: The web server's image.
    nullable: true
    properties:
      repository:
        default: nginx
        minLength: 1
        nullable: true
        type: string
    type: object
    x-kubernetes-preserve-unknown-fields: true
type: object
x-kubernetes-preserve-unknown-fields: true
`,
	}, {
		name: "schema: type lists",
		values: `
tag: v1
maxUnavailable: 25%
scale: 1
`,
		jsonSchema: `{
  "type": "object",
  "properties": {
    "tag": {"type": ["string", "null"]},
    "maxUnavailable": {"type": ["integer", "string"]},
    "scale": {"type": ["number", "integer"]},
    "flag": {"type": ["string", "boolean"]}
  }
}`,
		want: `
default:
  maxUnavailable: 25%
  scale: 1
  tag: v1
properties:
  flag:
    nullable: true
    x-kubernetes-preserve-unknown-fields: true
  maxUnavailable:
    default: 25%
    nullable: true
    x-kubernetes-int-or-string: true
  scale:
    default: 1
    nullable: true
    type: number
  tag:
    default: v1
    nullable: true
    type: string
type: object
x-kubernetes-preserve-unknown-fields: true
`,
		wantNotes: []string{"spec.flag: free-form: its schema allows boolean, string"},
	}, {
		name: "schema: oneOf dropped, free-form when it leaves no type",
		values: `
port: 80
name: web
`,
		jsonSchema: `{
  "type": "object",
  "properties": {
    "port": {"oneOf": [{"type": "integer"}, {"type": "string"}]},
    "name": {"type": "string", "anyOf": [{"minLength": 1}, {"const": ""}]}
  }
}`,
		want: `
default:
  name: web
  port: 80
properties:
  name:
    default: web
    nullable: true
    type: string
  port:
    default: 80
    nullable: true
    x-kubernetes-preserve-unknown-fields: true
type: object
x-kubernetes-preserve-unknown-fields: true
`,
		wantNotes: []string{
			"spec.name: dropped anyOf: the kind's schema does not check it",
			"spec.port: dropped oneOf: the kind's schema does not check it",
			"spec.port: free-form: its schema gives no type",
		},
	}, {
		name: "schema: a recursive $ref is free-form",
		values: `
tree:
  name: root
  children:
  - name: leaf
`,
		jsonSchema: `{
  "type": "object",
  "properties": {"tree": {"$ref": "#/definitions/node"}},
  "definitions": {
    "node": {
      "type": "object",
      "properties": {
        "name": {"type": "string"},
        "children": {"type": "array", "items": {"$ref": "#/definitions/node"}}
      }
    }
  }
}`,
		want: `
default:
  tree:
    children:
    - name: leaf
    name: root
properties:
  tree:
    default:
      children:
      - name: leaf
      name: root
    nullable: true
    properties:
      children:
        default:
        - name: leaf
        items:
          x-kubernetes-preserve-unknown-fields: true
        nullable: true
        type: array
      name:
        default: root
        nullable: true
        type: string
    type: object
    x-kubernetes-preserve-unknown-fields: true
type: object
x-kubernetes-preserve-unknown-fields: true
`,
		wantNotes: []string{"spec.tree.children[]: free-form: $ref #/definitions/node is recursive"},
	}, {
		name: "schema: a default invalid for its type is left out, of its parents' too",
		values: `
service:
  port: eighty
  type: ClusterIP
`,
		jsonSchema: `{
  "type": "object",
  "properties": {
    "service": {
      "type": "object",
      "properties": {
        "port": {"type": "integer"},
        "type": {"type": "string", "enum": ["ClusterIP", "NodePort"]}
      }
    }
  }
}`,
		want: `
default:
  service:
    type: ClusterIP
properties:
  service:
    default:
      type: ClusterIP
    nullable: true
    properties:
      port:
        nullable: true
        type: integer
      type:
        default: ClusterIP
        enum: [ClusterIP, NodePort]
        nullable: true
        type: string
    type: object
    x-kubernetes-preserve-unknown-fields: true
type: object
x-kubernetes-preserve-unknown-fields: true
`,
		wantNotes: []string{`spec.service.port: no default: the chart's value is not valid: must be of type integer: "string"`},
	}, {
		name: "schema: bounds, formats and patterns",
		values: `
replicas: 2
ratio: 0.5
since: "2024-01-01T00:00:00Z"
timeout: 1m
`,
		jsonSchema: `{
  "type": "object",
  "properties": {
    "replicas": {"type": "integer", "minimum": 0, "exclusiveMinimum": true, "format": "int32"},
    "ratio": {"type": "number", "exclusiveMaximum": 1, "maximum": 2},
    "since": {"type": "string", "format": "date-time"},
    "timeout": {"type": "string", "format": "duration", "pattern": "^(?!0)[0-9]+[smh]$"}
  }
}`,
		want: `
default:
  ratio: 0.5
  replicas: 2
  since: "2024-01-01T00:00:00Z"
  timeout: 1m
properties:
  ratio:
    default: 0.5
    exclusiveMaximum: true
    maximum: 1
    nullable: true
    type: number
  replicas:
    default: 2
    exclusiveMinimum: true
    format: int32
    minimum: 0
    nullable: true
    type: integer
  since:
    default: "2024-01-01T00:00:00Z"
    format: date-time
    nullable: true
    type: string
  timeout:
    default: 1m
    nullable: true
    type: string
type: object
x-kubernetes-preserve-unknown-fields: true
`,
		wantNotes: []string{
			`spec.timeout: dropped format "duration": the API server does not check it as JSON Schema does`,
			"spec.timeout: dropped pattern \"^(?!0)[0-9]+[smh]$\": the API server cannot compile it: error parsing regexp: invalid or unsupported Perl syntax: `(?!`",
		},
	}, {
		name: "schema: required kept; an object whose default would lack one has none",
		values: `
image:
  repository: nginx
auth:
  user: admin
`,
		jsonSchema: `{
  "type": "object",
  "required": ["image"],
  "properties": {
    "image": {"type": "object", "required": ["repository"], "properties": {"repository": {"type": "string"}}},
    "auth": {"type": "object", "required": ["user", "password"], "properties": {"user": {"type": "string"}, "password": {"type": "string"}}}
  }
}`,
		want: `
default:
  image:
    repository: nginx
properties:
  auth:
    nullable: true
    properties:
      password:
        nullable: true
        type: string
      user:
        default: admin
        nullable: true
        type: string
    required: [user, password]
    type: object
    x-kubernetes-preserve-unknown-fields: true
  image:
    default:
      repository: nginx
    nullable: true
    properties:
      repository:
        default: nginx
        nullable: true
        type: string
    required: [repository]
    type: object
    x-kubernetes-preserve-unknown-fields: true
required: [image]
type: object
x-kubernetes-preserve-unknown-fields: true
`,
		wantNotes: []string{"spec.auth: no default: the chart's value is not valid: password is required"},
	}, {
		name: "schema: additionalProperties not kept, objects without properties free-form",
		values: `
podDisruptionBudget:
  enabled: true
env:
  LOG_LEVEL: info
settings:
  a: 1
`,
		jsonSchema: `{
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "podDisruptionBudget": {"type": "object", "additionalProperties": false, "properties": {"enabled": {"type": "boolean"}}},
    "env": {"type": "object", "additionalProperties": {"type": "string"}},
    "settings": {"type": "object"}
  }
}`,
		want: `
default:
  env:
    LOG_LEVEL: info
  podDisruptionBudget:
    enabled: true
  settings:
    a: 1
properties:
  env:
    default:
      LOG_LEVEL: info
    nullable: true
    type: object
    x-kubernetes-preserve-unknown-fields: true
  podDisruptionBudget:
    default:
      enabled: true
    nullable: true
    properties:
      enabled:
        default: true
        nullable: true
        type: boolean
    type: object
    x-kubernetes-preserve-unknown-fields: true
  settings:
    default:
      a: 1
    nullable: true
    type: object
    x-kubernetes-preserve-unknown-fields: true
type: object
x-kubernetes-preserve-unknown-fields: true
`,
		wantNotes: []string{
			"spec.env: dropped additionalProperties: unknown keys are kept unchecked",
			"spec: additionalProperties: false not kept: the kind keeps unknown keys (noted once)",
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			values := map[string]any{}
			if err := yaml.Unmarshal([]byte(tt.values), &values); err != nil {
				t.Fatal(err)
			}
			var jsonSchema []byte
			if tt.jsonSchema != "" {
				jsonSchema = []byte(tt.jsonSchema)
			}
			got, notes, err := SpecSchema(values, jsonSchema)
			if err != nil {
				t.Fatal(err)
			}
			gotYAML, err := yaml.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(schemaCanonicalYAML(t, tt.want), string(gotYAML)); diff != "" {
				t.Errorf("schema (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantNotes, notes); diff != "" {
				t.Errorf("notes (-want +got):\n%s", diff)
			}
			for _, err := range schemaRefusals(t, got) {
				t.Errorf("the API server would refuse the schema: %v", err)
			}
		})
	}
}

func TestSpecSchemaInvalidJSON(t *testing.T) {
	if _, _, err := SpecSchema(nil, []byte(`{"type": `)); err == nil {
		t.Error("SpecSchema took a values.schema.json that is not JSON")
	}
}

// schemaCanonicalYAML is s as yaml.Marshal writes it, so that a want may
// use flow style.
func schemaCanonicalYAML(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	out, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// schemaRefusals are the errors the API server's checks of a
// CustomResourceDefinition whose spec has the schema spec would find there:
// a structural schema, no nullable at spec's root, and every default valid
// and already pruned. (ValidateCustomResourceDefinition makes them, but its
// package links the CEL runtime and the API server's feature gates, which
// are not in go.mod; these are its checks of a schema without CEL rules.)
func schemaRefusals(t *testing.T, spec *apiextensionsv1.JSONSchemaProps) field.ErrorList {
	t.Helper()
	path := field.NewPath("spec", "versions").Index(0).Child("schema", "openAPIV3Schema")
	crdSchema := &apiextensionsv1.JSONSchemaProps{
		Type:       "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": *spec},
	}
	internal := &apiextensionsinternal.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(crdSchema, internal, nil); err != nil {
		t.Fatal(err)
	}
	structural, err := structuralschema.NewStructural(internal)
	if err != nil {
		return field.ErrorList{field.Invalid(path, nil, err.Error())}
	}
	errs := structuralschema.ValidateStructural(path, structural)
	if spec.Nullable {
		errs = append(errs, field.Forbidden(path.Child("properties").Key("spec").Child("nullable"), "spec is not nullable"))
	}
	return append(errs, schemaDefaultRefusals(path, structural)...)
}

// schemaDefaultRefusals checks the defaults in s as the API server does: each
// valid for its schema, and unchanged by pruning.
func schemaDefaultRefusals(path *field.Path, s *structuralschema.Structural) field.ErrorList {
	var errs field.ErrorList
	if d := s.Default.Object; d != nil {
		result := validate.NewSchemaValidator(s.ToKubeOpenAPI(), nil, "", strfmt.Default).Validate(runtime.DeepCopyJSONValue(d))
		for _, err := range result.Errors {
			errs = append(errs, field.Invalid(path.Child("default"), d, err.Error()))
		}
		pruned := runtime.DeepCopyJSONValue(d)
		pruning.Prune(pruned, s, false)
		if !reflect.DeepEqual(pruned, d) {
			errs = append(errs, field.Invalid(path.Child("default"), d, "must not have unknown fields"))
		}
	}
	for key, p := range s.Properties {
		errs = append(errs, schemaDefaultRefusals(path.Child("properties").Key(key), &p)...)
	}
	if s.Items != nil {
		errs = append(errs, schemaDefaultRefusals(path.Child("items"), s.Items)...)
	}
	return errs
}
