package schema

import (
	"errors"
	"fmt"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"slices"
	"strings"
	"sync"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apimachinery/pkg/api/meta"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	runtimeschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/applyconfigurations"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	openapierrors "k8s.io/kube-openapi/pkg/validation/errors"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

// ErrNoSchema says that the object's type is neither built in nor one of
// the validator's CustomResourceDefinitions, so it could not be checked.
var ErrNoSchema = errors.New("no schema")

// Problem is one way an object breaks its type's schema.
type Problem struct {
	// Path is the field, as .spec.template.spec.containers[0].image.
	Path string
	// Message says what is wrong, as the API server would.
	Message string
}

func (p Problem) String() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// Error lists every problem found in one object.
type Error struct {
	// Object names the object: Kind namespace/name.
	Object   string
	Problems []Problem
}

func (e *Error) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.String()
	}
	return e.Object + ": " + strings.Join(msgs, "; ")
}

// Validator checks objects against the built-in types' schemas and the
// schemas of the CustomResourceDefinitions it was made with. It is safe for
// concurrent use.
type Validator struct {
	crds map[runtimeschema.GroupVersionKind]*crdSchema
}

// crdSchema is one served version of a CustomResourceDefinition.
type crdSchema struct {
	structural *structuralschema.Structural
	openAPI    *validate.SchemaValidator
}

// builtin converts built-in objects to structured-merge-diff values with
// the schemas client-go ships, which checks them. Built once, on first use.
var builtin = sync.OnceValue(func() managedfields.TypeConverter {
	return applyconfigurations.NewTypeConverter(clientgoscheme.Scheme)
})

// New returns a validator for the built-in types and the served versions of
// crds.
func New(crds ...*apiextensionsv1.CustomResourceDefinition) (*Validator, error) {
	v := &Validator{crds: map[runtimeschema.GroupVersionKind]*crdSchema{}}
	for _, crd := range crds {
		for _, ver := range crd.Spec.Versions {
			if !ver.Served || ver.Schema == nil || ver.Schema.OpenAPIV3Schema == nil {
				continue
			}
			s, err := newCRDSchema(ver.Schema.OpenAPIV3Schema)
			if err != nil {
				return nil, fmt.Errorf("CustomResourceDefinition %s, version %s: %w", crd.Name, ver.Name, err)
			}
			v.crds[runtimeschema.GroupVersionKind{Group: crd.Spec.Group, Version: ver.Name, Kind: crd.Spec.Names.Kind}] = s
		}
	}
	return v, nil
}

func newCRDSchema(props *apiextensionsv1.JSONSchemaProps) (*crdSchema, error) {
	internal := &apiextensionsinternal.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(props, internal, nil); err != nil {
		return nil, fmt.Errorf("converting its schema: %w", err)
	}
	structural, err := structuralschema.NewStructural(internal)
	if err != nil {
		return nil, fmt.Errorf("its schema is not structural: %w", err)
	}
	return &crdSchema{
		structural: structural,
		openAPI:    validate.NewSchemaValidator(structural.ToKubeOpenAPI(), nil, "", strfmt.Default),
	}, nil
}

// Validate checks o: nil when it is valid, an *Error listing its problems,
// or an error wrapping ErrNoSchema when its type is unknown to v.
func (v *Validator) Validate(o *unstructured.Unstructured) error {
	gvk := o.GroupVersionKind()
	var problems []Problem
	if crd, ok := v.crds[gvk]; ok {
		problems = crd.validate(o)
	} else if clientgoscheme.Scheme.Recognizes(gvk) {
		problems = append(builtinProblems(o), missingRequired(gvk, o.Object)...)
	} else {
		return fmt.Errorf("%s %s: %w (give its CustomResourceDefinition)", gvk.Kind, name(o), ErrNoSchema)
	}
	problems = append(problems, metadataProblems(o, nameRule(gvk))...)
	if len(problems) == 0 {
		return nil
	}
	slices.SortStableFunc(problems, func(a, b Problem) int { return strings.Compare(a.Path, b.Path) })
	return &Error{Object: gvk.Kind + " " + name(o), Problems: slices.Compact(problems)}
}

func name(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}

// unknownField is structured-merge-diff's message for a field its schema
// lacks, the same as pruning's for a custom resource.
const unknownField = "field not declared in schema"

// builtinProblems checks a built-in object with structured-merge-diff. It
// stops at the first unknown field of each object it walks, so each one it
// finds is noted, taken out of a copy, and the copy checked again: every
// unknown field is reported at once. Paths name list items by index.
func builtinProblems(o *unstructured.Unstructured) []Problem {
	content := o.DeepCopy()
	var problems []Problem
	for {
		_, err := builtin().ObjectToTyped(content)
		if err == nil {
			return problems
		}
		var errs typed.ValidationErrors
		if !errors.As(err, &errs) {
			return append(problems, Problem{Message: err.Error()})
		}
		var unknown, other []Problem
		for _, e := range errs {
			path, parent, field, ok := indexPath(content.Object, e.Path)
			switch {
			case ok && parent != nil && e.ErrorMessage == unknownField:
				delete(parent, field) // each round takes one out at least: it ends
				unknown = append(unknown, Problem{Path: path, Message: e.ErrorMessage})
			case ok:
				other = append(other, Problem{Path: path, Message: e.ErrorMessage})
			default:
				other = append(other, Problem{Path: e.Path, Message: e.ErrorMessage})
			}
		}
		problems = append(problems, unknown...)
		if len(unknown) == 0 {
			return append(problems, other...) // the others again when fields went
		}
	}
}

// validate checks a custom resource as the API server does on create:
// unknown fields (which it would prune), then the OpenAPI schema. CEL rules
// (x-kubernetes-validations) are left to the API server, to keep a CEL
// runtime out of the operator's binary.
func (s *crdSchema) validate(o *unstructured.Unstructured) []Problem {
	opts := structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}
	var problems []Problem
	content := o.DeepCopy().Object
	for _, p := range pruning.PruneWithOptions(content, s.structural, true, opts) {
		problems = append(problems, Problem{Path: "." + p, Message: "field not declared in schema"})
	}
	defaultObject(content, s.structural) // as the API server does before it validates
	for _, err := range s.openAPI.Validate(content).Errors {
		problems = append(problems, openAPIProblem(err))
	}
	return problems
}

// openAPIProblem turns a kube-openapi validation error into a problem.
func openAPIProblem(err error) Problem {
	var v *openapierrors.Validation
	if !errors.As(err, &v) || v.Name == "" || v.Name == "." {
		return Problem{Message: err.Error()}
	}
	name := strings.TrimPrefix(v.Name, ".")
	return Problem{Path: "." + name, Message: strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(err.Error(), name), " in body"))}
}

func fieldProblems(errs field.ErrorList) []Problem {
	out := make([]Problem, 0, len(errs))
	for _, e := range errs {
		out = append(out, Problem{Path: "." + e.Field, Message: e.ErrorBody()})
	}
	return out
}

// metadataProblems checks o's metadata with apimachinery's validation. The
// ownerReferences are left out: stencil writes them, and offline the owner
// has no UID. So is the scope (render holds an object's namespace to its
// kind's declaration).
func metadataProblems(o *unstructured.Unstructured, nameFn metavalidation.ValidateNameFunc) []Problem {
	acc, err := meta.Accessor(o.DeepCopy())
	if err != nil {
		return []Problem{{Path: ".metadata", Message: err.Error()}}
	}
	acc.SetOwnerReferences(nil)
	return fieldProblems(metavalidation.ValidateObjectMetaAccessor(acc, o.GetNamespace() != "", nameFn, field.NewPath("metadata")))
}

// nameRule is the rule the API server holds a built-in type's name to:
// Services' are DNS-1035 labels, Namespaces' DNS-1123 labels, RBAC's any
// path segment (system:metrics-reader), others' DNS-1123 subdomains.
func nameRule(gvk runtimeschema.GroupVersionKind) metavalidation.ValidateNameFunc {
	if gvk.Group == "rbac.authorization.k8s.io" {
		return func(name string, _ bool) []string { return content.IsPathSegmentName(name) }
	}
	switch gvk.GroupKind() {
	case runtimeschema.GroupKind{Kind: "Service"}:
		return metavalidation.NameIsDNS1035Label
	case runtimeschema.GroupKind{Kind: "Namespace"}:
		return metavalidation.NameIsDNSLabel
	}
	return metavalidation.NameIsDNSSubdomain
}

// FieldPaths lists the fields e refuses that the object has, for render to
// find the template line that wrote the first (a missing field was written
// nowhere).
func (e *Error) FieldPaths() []string {
	paths := make([]string, 0, len(e.Problems))
	for _, p := range e.Problems {
		if p.Message != "Required value" {
			paths = append(paths, p.Path)
		}
	}
	return paths
}

// Prune removes from obj, in place, the fields that the schema of its
// version (one of v's CustomResourceDefinitions') does not declare, as the
// API server does before it stores a custom resource. It does nothing to
// an object of a type v has no schema for.
func (v *Validator) Prune(obj map[string]any) {
	u := &unstructured.Unstructured{Object: obj}
	if s, ok := v.crds[u.GroupVersionKind()]; ok {
		pruning.Prune(obj, s.structural, true)
	}
}

// Problems lists how obj, a custom resource of one of v's
// CustomResourceDefinitions, breaks its version's schema (unknown fields,
// the OpenAPI rules; not CEL's), as [Validator.Validate] finds them; nil
// for an object of a type v has no schema for.
func (v *Validator) Problems(obj map[string]any) []string {
	u := &unstructured.Unstructured{Object: obj}
	s, ok := v.crds[u.GroupVersionKind()]
	if !ok {
		return nil
	}
	var out []string
	for _, p := range s.validate(u) {
		out = append(out, p.String())
	}
	return out
}
