package chartimport

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
)

// SpecSchema is the schema of a chart-kind's spec: from the chart's
// values.schema.json when it has one (jsonSchema not empty), else inferred from
// values (values.yaml parsed with sigs.k8s.io/yaml into map[string]any, so
// numbers are float64; a float64 with no fraction is taken for an integer),
// with values as defaults either way. notes say, one line each with the
// values path (e.g. "spec.affinity"), what was made free-form or dropped and
// why.
//
// The schema is structural (the API server accepts it in a
// CustomResourceDefinition) and keeps Helm's meaning of values: unknown keys
// are kept (templates may read them), every property is nullable (a null
// deletes the chart's default in Helm; the API server keeps the null and
// does not default it), and every key values gives has its value as default,
// objects their whole value (so nested defaults appear when the parent is
// absent; spec's own default is all of values, for a resource without
// spec). Helm deep-merges a user's map with the chart's; the API server
// defaults only absent keys, so the two agree for typed objects, not inside
// free-form ones (a user's resources replaces the chart's whole).
func SpecSchema(values map[string]any, jsonSchema []byte) (*apiextensionsv1.JSONSchemaProps, []string, error) {
	if values == nil {
		values = map[string]any{}
	}
	b := &schemaBuilder{inlining: map[string]bool{}}
	var root apiextensionsv1.JSONSchemaProps
	if len(jsonSchema) == 0 {
		root = b.inferObject(values, "spec")
	} else {
		if err := json.Unmarshal(jsonSchema, &b.document); err != nil {
			return nil, nil, fmt.Errorf("reading values.schema.json: %w", err)
		}
		root = b.convertRoot(values)
	}
	b.setDefault(&root, values, "spec")
	slices.Sort(b.notes)
	return &root, slices.Compact(b.notes), nil
}

// schemaBuilder holds what one SpecSchema call gathers.
type schemaBuilder struct {
	// document is the chart's values.schema.json, which local $refs point into.
	document any
	// inlining holds the $refs being inlined on the way to the current
	// node: meeting one again is a recursion, which a CRD schema cannot hold.
	inlining map[string]bool
	notes    []string
	// closedNoted: additionalProperties: false has been noted (once is enough).
	closedNoted bool
}

func (b *schemaBuilder) note(path, format string, args ...any) {
	b.notes = append(b.notes, path+": "+fmt.Sprintf(format, args...))
}

// schemaFreeFormKeys are values keys whose value a chart hands to Kubernetes
// as it is (a pod's resources, affinity, tolerations...): their real type is
// Kubernetes', not what the chart's default suggests, so inferring one from
// an example ({} or a few fields) would refuse valid values. Keys ending in
// "Annotations" or "Labels" are free-form too (schemaIsFreeFormKey). Where
// a chart's values.schema.json describes such a key, its description wins.
var schemaFreeFormKeys = map[string]bool{
	"resources":                 true,
	"affinity":                  true,
	"nodeSelector":              true,
	"tolerations":               true,
	"annotations":               true,
	"podAnnotations":            true,
	"labels":                    true,
	"podLabels":                 true,
	"securityContext":           true,
	"podSecurityContext":        true,
	"extraEnv":                  true,
	"env":                       true,
	"extraVolumes":              true,
	"extraVolumeMounts":         true,
	"volumes":                   true,
	"volumeMounts":              true,
	"topologySpreadConstraints": true,
	"initContainers":            true,
	"sidecars":                  true,
	"extraContainers":           true,
}

func schemaIsFreeFormKey(key string) bool {
	return schemaFreeFormKeys[key] || strings.HasSuffix(key, "Annotations") || strings.HasSuffix(key, "Labels")
}

// inferObject is the schema of a map of values: an object with a property
// per key that keeps unknown keys.
func (b *schemaBuilder) inferObject(values map[string]any, path string) apiextensionsv1.JSONSchemaProps {
	s := apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: schemaTrue()}
	b.addInferred(&s, values, path)
	return s
}

// addInferred gives s a property, inferred from its value, for each key of
// values s does not describe.
func (b *schemaBuilder) addInferred(s *apiextensionsv1.JSONSchemaProps, values map[string]any, path string) {
	for _, key := range slices.Sorted(maps.Keys(values)) {
		if _, ok := s.Properties[key]; ok {
			continue
		}
		if s.Properties == nil {
			s.Properties = map[string]apiextensionsv1.JSONSchemaProps{}
		}
		s.Properties[key] = schemaProperty(b.infer(key, values[key], schemaChild(path, key)))
	}
}

// infer is the schema of the value of key. An empty or null value says
// nothing of what may replace it, so it is free-form, never a typed object
// that its empty value would make mean "no fields".
func (b *schemaBuilder) infer(key string, v any, path string) apiextensionsv1.JSONSchemaProps {
	if schemaIsFreeFormKey(key) {
		b.note(path, "free-form: %s is a Kubernetes type the chart passes through", key)
		return schemaFreeFormLike(v)
	}
	switch v := v.(type) {
	case nil:
		b.note(path, "free-form: its default is null")
		return schemaAny()
	case map[string]any:
		if len(v) == 0 {
			b.note(path, "free-form: its default is {}")
			return schemaFreeFormLike(v)
		}
		return b.inferObject(v, path)
	case []any:
		return b.inferList(v, path)
	}
	if t := schemaScalarType(v); t != "" {
		return apiextensionsv1.JSONSchemaProps{Type: t}
	}
	b.note(path, "free-form: a %T is not a JSON value", v)
	return schemaAny()
}

// inferList types a list's items only when all are scalars of one type: a
// list of objects is usually a Kubernetes list (ports, rules) whose fields
// the first elements do not all show.
func (b *schemaBuilder) inferList(list []any, path string) apiextensionsv1.JSONSchemaProps {
	s := apiextensionsv1.JSONSchemaProps{Type: "array", Items: schemaAnyItems()}
	if t := schemaListType(list); t != "" {
		s.Items = &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: t}}
		return s
	}
	if len(list) == 0 {
		b.note(path, "free-form items: its default is []")
	} else {
		b.note(path, "free-form items: its elements are not scalars of one type")
	}
	return s
}

// schemaListType is the type of all elements of list, "" when they are not
// scalars of one type (integers among numbers are numbers).
func schemaListType(list []any) string {
	t := ""
	for _, e := range list {
		et := schemaScalarType(e)
		switch {
		case et == "":
			return ""
		case t == "" || t == et:
			t = et
		case schemaNumeric(t) && schemaNumeric(et):
			t = "number"
		default:
			return ""
		}
	}
	return t
}

func schemaNumeric(t string) bool { return t == "integer" || t == "number" }

// schemaMaxExactInteger is 2^53: past it a float64 no longer holds every
// integer, so a whole float64 is a number.
const schemaMaxExactInteger = 1 << 53

// schemaScalarType is the JSON Schema type of a scalar, "" for others.
func schemaScalarType(v any) string {
	switch v := v.(type) {
	case string:
		return "string"
	case bool:
		return "boolean"
	case int, int32, int64:
		return "integer"
	case float64:
		if v == math.Trunc(v) && math.Abs(v) <= schemaMaxExactInteger {
			return "integer"
		}
		return "number"
	}
	return ""
}

// schemaFreeFormLike is a free-form schema of v's shape: an object for a map,
// a list of anything for a list, anything else for the rest.
func schemaFreeFormLike(v any) apiextensionsv1.JSONSchemaProps {
	switch v.(type) {
	case map[string]any:
		return apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: schemaTrue()}
	case []any:
		return apiextensionsv1.JSONSchemaProps{Type: "array", Items: schemaAnyItems()}
	}
	return schemaAny()
}

func schemaAny() apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{XPreserveUnknownFields: schemaTrue()}
}

func schemaAnyItems() *apiextensionsv1.JSONSchemaPropsOrArray {
	s := schemaAny()
	return &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &s}
}

func schemaTrue() *bool {
	t := true
	return &t
}

// schemaProperty makes s a property: nullable, since in Helm a null value
// deletes the chart's default, which the API server does by keeping the null
// (it defaults only absent or non-nullable fields).
func schemaProperty(s apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
	s.Nullable = true
	return s
}

// schemaPlainKey is a key a values path shows after a dot.
var schemaPlainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

func schemaChild(path, key string) string {
	if schemaPlainKey.MatchString(key) {
		return path + "." + key
	}
	return fmt.Sprintf("%s[%q]", path, key)
}

// setDefault sets s's default to v, after its properties' (whose kept
// defaults make v's fields), unless v is null or not valid for s (a string
// under an integer, a required field without default): then it notes why.
// It returns what s's parent's default holds for s, and false when the
// parent's default must leave s out: a null too, which Helm reads as no
// key (and the API server would check against an enum).
func (b *schemaBuilder) setDefault(s *apiextensionsv1.JSONSchemaProps, v any, path string) (any, bool) {
	if v == nil {
		return nil, false
	}
	if m, ok := v.(map[string]any); ok && len(s.Properties) > 0 {
		v = b.setPropertyDefaults(s, m, path)
	}
	raw, err := json.Marshal(v)
	if err == nil {
		err = schemaCheckValue(s, raw)
	}
	if err != nil {
		b.note(path, "no default: the chart's value is not valid: %v", err)
		return nil, false
	}
	s.Default = &apiextensionsv1.JSON{Raw: raw}
	return v, true
}

// setPropertyDefaults sets the defaults of s's properties from m, and
// returns m without the values that could not be defaults.
func (b *schemaBuilder) setPropertyDefaults(s *apiextensionsv1.JSONSchemaProps, m map[string]any, path string) map[string]any {
	kept := make(map[string]any, len(m))
	for _, key := range slices.Sorted(maps.Keys(m)) {
		p, ok := s.Properties[key]
		if !ok {
			if m[key] != nil {
				kept[key] = m[key]
			}
			continue
		}
		if d, ok := b.setDefault(&p, m[key], schemaChild(path, key)); ok {
			kept[key] = d
		}
		s.Properties[key] = p
	}
	return kept
}

// schemaCheckValue says why the JSON raw is not a valid value of s, as the
// API server checks a default (kube-openapi's validator on the structural
// schema, numbers read as it reads them), or nil. An object's properties are
// left out: setPropertyDefaults kept only their valid values, and checking
// them again at every level would make a deep chart slow.
func schemaCheckValue(s *apiextensionsv1.JSONSchemaProps, raw []byte) error {
	shallow := *s
	if len(shallow.Properties) > 0 {
		shallow.Properties = nil
		shallow.XPreserveUnknownFields = schemaTrue()
	}
	internal := &apiextensionsinternal.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(&shallow, internal, nil); err != nil {
		return fmt.Errorf("converting its schema: %w", err)
	}
	structural, err := structuralschema.NewStructural(internal)
	if err != nil {
		return fmt.Errorf("its schema is not structural: %w", err)
	}
	var value any
	if err := utiljson.Unmarshal(raw, &value); err != nil {
		return fmt.Errorf("reading it back: %w", err)
	}
	result := validate.NewSchemaValidator(structural.ToKubeOpenAPI(), nil, "", strfmt.Default).Validate(value)
	if result.IsValid() {
		return nil
	}
	problems := make([]string, 0, len(result.Errors))
	for _, err := range result.Errors {
		problems = append(problems, schemaProblem(err))
	}
	return errors.New(strings.Join(problems, "; "))
}

// schemaProblem words a kube-openapi validation error for a note: "port
// must be of type integer", not ".port in body must be...".
func schemaProblem(err error) string {
	msg := strings.Replace(err.Error(), " in body", "", 1)
	return strings.TrimSpace(strings.TrimPrefix(msg, "."))
}

// convertRoot converts the chart's JSON Schema document, which must describe
// an object, and adds the keys of values it does not list.
func (b *schemaBuilder) convertRoot(values map[string]any) apiextensionsv1.JSONSchemaProps {
	b.inlining["#"] = true
	root := b.convert(b.document, values, "spec")
	if root.Type != "object" {
		b.note("spec", "the schema does not describe an object: inferred from values instead")
		return b.inferObject(values, "spec")
	}
	root.Nullable = false // the API server refuses a nullable root
	b.addInferred(&root, values, "spec")
	return root
}

// convert turns one JSON Schema node into a structural schema node. value is
// the node's value in values, whose keys the schema does not list are added
// inferred.
func (b *schemaBuilder) convert(node, value any, path string) apiextensionsv1.JSONSchemaProps {
	m, ok := node.(map[string]any)
	if !ok {
		if node != true {
			b.note(path, "free-form: its schema is %v, not an object", node)
		}
		return schemaAny()
	}
	m, done, ok := b.resolve(m, path)
	defer done()
	if !ok {
		return schemaAny()
	}
	s := b.convertType(m, path)
	b.convertChecks(m, &s, path)
	b.noteDropped(m, path)
	switch s.Type {
	case "object":
		b.convertProperties(m, &s, value, path)
	case "array":
		s.Items = b.convertItems(m, path)
	}
	return s
}

// resolve inlines m's chain of local $refs: each target's keywords, with
// m's beside the $ref over them (2019-09 reads those; earlier drafts ignore
// them, which charts rarely rely on). It returns the schema, a func that
// ends the inlining once the node is converted, and false (with a note) when
// a $ref is recursive or not in the document.
func (b *schemaBuilder) resolve(m map[string]any, path string) (map[string]any, func(), bool) {
	var active []string
	done := func() {
		for _, ref := range active {
			delete(b.inlining, ref)
		}
	}
	for {
		ref, ok := m["$ref"].(string)
		if !ok {
			return m, done, true
		}
		if b.inlining[ref] {
			b.note(path, "free-form: $ref %s is recursive", ref)
			return nil, done, false
		}
		target, ok := b.lookup(ref)
		if !ok {
			b.note(path, "free-form: $ref %s is not a schema in values.schema.json", ref)
			return nil, done, false
		}
		b.inlining[ref] = true
		active = append(active, ref)
		merged := maps.Clone(target)
		for k, v := range m {
			if k != "$ref" {
				merged[k] = v
			}
		}
		m = merged
	}
}

// schemaPointerToken unescapes a JSON Pointer token (RFC 6901).
var schemaPointerToken = strings.NewReplacer("~1", "/", "~0", "~")

// lookup finds the schema a local $ref ("#", "#/definitions/x",
// "#/$defs/x", any JSON Pointer into the document) points to.
func (b *schemaBuilder) lookup(ref string) (map[string]any, bool) {
	pointer, ok := strings.CutPrefix(ref, "#")
	if !ok || (pointer != "" && !strings.HasPrefix(pointer, "/")) {
		return nil, false
	}
	node := b.document
	for _, token := range strings.Split(pointer, "/")[1:] {
		m, ok := node.(map[string]any)
		if !ok {
			return nil, false
		}
		node = m[schemaPointerToken.Replace(token)]
	}
	m, ok := node.(map[string]any)
	return m, ok
}

// schemaTypes are the JSON Schema types a structural schema can hold.
var schemaTypes = map[string]bool{"string": true, "integer": true, "number": true, "boolean": true, "object": true, "array": true}

// convertType reads type: one type is kept; "null" among types makes the
// node nullable; integer or string is x-kubernetes-int-or-string; integer or
// number is number; others, and no type, are free-form. Without type,
// properties or items say object or array, as the author meant: free-form,
// such an object would lose its fields' defaults whenever a user gives it
// (Helm would merge them in). An object
// keeps unknown fields: JSON Schema allows them unless additionalProperties
// is false, and that one we drop (noteAdditional).
func (b *schemaBuilder) convertType(m map[string]any, path string) apiextensionsv1.JSONSchemaProps {
	types := schemaTypeList(m)
	s := apiextensionsv1.JSONSchemaProps{Nullable: slices.Contains(types, "null")}
	types = slices.DeleteFunc(types, func(t string) bool { return t == "null" })
	switch {
	case len(types) == 1 && schemaTypes[types[0]]:
		s.Type = types[0]
	case slices.Equal(types, []string{"integer", "string"}):
		s.XIntOrString = true
	case slices.Equal(types, []string{"integer", "number"}):
		s.Type = "number"
	case len(types) == 0 && s.Nullable:
		b.note(path, "free-form: its schema allows only null")
		s.XPreserveUnknownFields = schemaTrue()
	case len(types) == 0:
		b.note(path, "free-form: its schema gives no type")
		s.XPreserveUnknownFields = schemaTrue()
	default:
		b.note(path, "free-form: its schema allows %s", strings.Join(types, ", "))
		s.XPreserveUnknownFields = schemaTrue()
	}
	if s.Type == "object" {
		s.XPreserveUnknownFields = schemaTrue()
	}
	return s
}

// schemaTypeList is m's type as a sorted list, guessed from properties or
// items when missing.
func schemaTypeList(m map[string]any) []string {
	var types []string
	switch t := m["type"].(type) {
	case string:
		types = []string{t}
	case []any:
		for _, e := range t {
			if s, ok := e.(string); ok {
				types = append(types, s)
			}
		}
	case nil:
		if _, ok := m["properties"]; ok {
			types = []string{"object"}
		} else if _, ok := m["items"]; ok {
			types = []string{"array"}
		}
	}
	slices.Sort(types)
	return slices.Compact(types)
}

// convertChecks keeps the value checks a CRD schema can make as JSON Schema
// does.
//
// required is kept even for a key values gives no default: Helm refuses to
// install a chart whose values lack a required key, so the API server
// refusing the resource says the same, earlier and by the field's name,
// where dropping it would leave the template to fail (or render without
// it). An object whose default would lack such a key gets no default
// (setDefault notes it): a required check only fires on an object given.
func (b *schemaBuilder) convertChecks(m map[string]any, s *apiextensionsv1.JSONSchemaProps, path string) {
	s.Description, _ = m["description"].(string)
	s.Enum = schemaEnum(m["enum"])
	s.Minimum, s.ExclusiveMinimum = schemaBound(m, "minimum", "exclusiveMinimum", func(a, b float64) bool { return a > b })
	s.Maximum, s.ExclusiveMaximum = schemaBound(m, "maximum", "exclusiveMaximum", func(a, b float64) bool { return a < b })
	s.MinLength = schemaCount(m, "minLength")
	s.MaxLength = schemaCount(m, "maxLength")
	s.MinItems = schemaCount(m, "minItems")
	s.MaxItems = schemaCount(m, "maxItems")
	s.Pattern = b.convertPattern(m, path)
	s.Format = b.convertFormat(m, s.Type, path)
	if s.Type == "object" {
		s.Required = schemaStrings(m["required"])
	}
}

// schemaEnum is enum without null (nullable says it).
func schemaEnum(v any) []apiextensionsv1.JSON {
	values, _ := v.([]any)
	var enum []apiextensionsv1.JSON
	for _, e := range values {
		if e == nil {
			continue
		}
		if raw, err := json.Marshal(e); err == nil {
			enum = append(enum, apiextensionsv1.JSON{Raw: raw})
		}
	}
	return enum
}

// schemaBound reads a bound and whether it is exclusive, from draft 4's
// boolean exclusiveMinimum/Maximum beside minimum/maximum or draft 6's
// numeric one; of both, the tighter wins.
func schemaBound(m map[string]any, key, exclusiveKey string, tighter func(a, b float64) bool) (*float64, bool) {
	bound, hasBound := m[key].(float64)
	switch e := m[exclusiveKey].(type) {
	case bool:
		if hasBound {
			return &bound, e
		}
	case float64:
		if !hasBound || !tighter(bound, e) {
			return &e, true
		}
	}
	if hasBound {
		return &bound, false
	}
	return nil, false
}

// schemaCount reads a non-negative whole number.
func schemaCount(m map[string]any, key string) *int64 {
	f, ok := m[key].(float64)
	if !ok || f < 0 || f != math.Trunc(f) {
		return nil
	}
	n := int64(f)
	return &n
}

func schemaStrings(v any) []string {
	list, _ := v.([]any)
	var out []string
	for _, e := range list {
		if s, ok := e.(string); ok && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// convertPattern keeps a pattern Go's regexp (the API server's) compiles;
// JSON Schema's are ECMA 262, mostly the same.
func (b *schemaBuilder) convertPattern(m map[string]any, path string) string {
	p, _ := m["pattern"].(string)
	if p == "" {
		return ""
	}
	if _, err := regexp.Compile(p); err != nil {
		b.note(path, "dropped pattern %q: the API server cannot compile it: %v", p, err)
		return ""
	}
	return p
}

// schemaFormats are the formats kept, per type: those the API server checks
// as JSON Schema means them. Others it ignores or reads otherwise (duration
// is ISO 8601 in JSON Schema, Go's syntax in Kubernetes), so they go.
var schemaFormats = map[string][]string{
	"string":  {"byte", "date", "date-time", "email", "hostname", "ipv4", "ipv6", "password", "uri", "uuid"},
	"integer": {"int32", "int64"},
	"number":  {"double", "float"},
}

func (b *schemaBuilder) convertFormat(m map[string]any, typ, path string) string {
	f, _ := m["format"].(string)
	if f == "" || slices.Contains(schemaFormats[typ], f) {
		return f
	}
	b.note(path, "dropped format %q: the API server does not check it as JSON Schema does", f)
	return ""
}

// schemaKeptKeywords are the keywords convert reads.
var schemaKeptKeywords = map[string]bool{
	"type": true, "properties": true, "items": true, "enum": true, "minimum": true, "maximum": true,
	"exclusiveMinimum": true, "exclusiveMaximum": true, "minLength": true, "maxLength": true,
	"pattern": true, "minItems": true, "maxItems": true, "required": true, "description": true,
	"format": true, "$ref": true, "definitions": true, "$defs": true,
}

// schemaAnnotationKeywords say nothing of which values are valid (default
// included: Helm does not apply a schema's defaults, values.yaml has them):
// dropping them changes nothing, so it is not noted.
var schemaAnnotationKeywords = map[string]bool{
	"$schema": true, "$id": true, "id": true, "$comment": true, "$anchor": true, "title": true,
	"default": true, "examples": true, "example": true, "readOnly": true, "writeOnly": true,
	"deprecated": true, "nullable": true, "contentMediaType": true, "contentEncoding": true,
}

// noteDropped notes the checks of m the CRD schema does not keep (oneOf,
// anyOf, allOf, not, if/then/else, patternProperties, const...): the API
// server will accept what Helm would refuse for them.
func (b *schemaBuilder) noteDropped(m map[string]any, path string) {
	for _, key := range slices.Sorted(maps.Keys(m)) {
		switch {
		case schemaKeptKeywords[key] || schemaAnnotationKeywords[key]:
		case key == "additionalProperties":
			b.noteAdditional(m[key], path)
		case key == "uniqueItems" && m[key] != true:
		default:
			b.note(path, "dropped %s: the kind's schema does not check it", key)
		}
	}
}

// noteAdditional notes an additionalProperties the CRD schema does not keep:
// a schema for unknown keys (not structural beside properties), or false,
// noted once: the kind keeps unknown keys, which Helm would refuse there.
func (b *schemaBuilder) noteAdditional(v any, path string) {
	switch v {
	case true:
	case false:
		if !b.closedNoted {
			b.closedNoted = true
			b.note(path, "additionalProperties: false not kept: the kind keeps unknown keys (noted once)")
		}
	default:
		b.note(path, "dropped additionalProperties: unknown keys are kept unchecked")
	}
}

// convertProperties converts m's properties, and adds the keys of value m
// does not list. An object without properties stays free-form: its author
// allowed any keys, which inferring types from the example would not.
func (b *schemaBuilder) convertProperties(m map[string]any, s *apiextensionsv1.JSONSchemaProps, value any, path string) {
	props, _ := m["properties"].(map[string]any)
	if len(props) == 0 {
		return
	}
	values, _ := value.(map[string]any)
	s.Properties = make(map[string]apiextensionsv1.JSONSchemaProps, len(props))
	for _, key := range slices.Sorted(maps.Keys(props)) {
		s.Properties[key] = schemaProperty(b.convert(props[key], values[key], schemaChild(path, key)))
	}
	b.addInferred(s, values, path)
}

// convertItems converts items; a list of per-position schemas (a tuple) is
// not structural, so those items are free-form.
func (b *schemaBuilder) convertItems(m map[string]any, path string) *apiextensionsv1.JSONSchemaPropsOrArray {
	items, ok := m["items"]
	if !ok {
		return schemaAnyItems()
	}
	if _, tuple := items.([]any); tuple {
		b.note(path, "free-form items: per-position items are not structural")
		return schemaAnyItems()
	}
	s := b.convert(items, nil, path+"[]")
	return &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &s}
}
