// Package schema checks rendered objects against the schemas of their types,
// offline, as the API server would before storing them:
//
//   - built-in types against the schemas client-go ships (its
//     applyconfigurations type converter, structured-merge-diff): unknown
//     fields, every one of them and each by its full path with list
//     indexes, and wrong types;
//   - built-in types' required fields, read from their Go types as
//     Kubernetes' OpenAPI generator reads them (a field without omitempty or
//     omitzero in its json tag is required);
//   - every object's metadata with apimachinery's own validation: name,
//     namespace, labels, annotations;
//   - custom resource types against their CustomResourceDefinitions'
//     structural schemas, defaults applied first: unknown fields
//     (apiextensions-apiserver's pruning), types, required fields, enums,
//     patterns and bounds (kube-openapi's validator). CEL rules
//     (x-kubernetes-validations) are left to the API server, to keep a CEL
//     runtime out of the operator's binary.
//
// [Validator.Default] sets a custom resource's defaults from its CRD, as the
// API server does before storing it, so that offline renders see what the
// operator reads.
//
// It is pure: no client, no network. The API server stays the authority; this
// package exists so that a template's typo fails in `stencil render`,
// `stencil lint` and `make test`, naming the file and field, instead of as an
// ApplyFailed status on every resource of a kind in production.
//
// It is not public API: it may change in any release. Depend on pkg/stencil
// and pkg/stenciltest (docs/stability.md).
package schema
