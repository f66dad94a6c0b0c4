package conversion

import (
	"fmt"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Break is a change of a kind's API that breaks its released one: a client
// or a stored resource that worked with the release would not.
type Break struct {
	// Version is the version changed; Path the field ("" for the version
	// itself).
	Version, Path string
	// What changed.
	What string
}

// Breaks compares a kind's CRD with its released one and returns every
// change that breaks the release, less those allowed: by version, the
// paths the kind declares changed on purpose ("*" for the version itself).
// converts lists the versions the kind converts between (its hub and those
// with conversion templates).
func Breaks(released, current *apiextensionsv1.CustomResourceDefinition, converts []string, allowed map[string][]string) []Break {
	var out []Break
	add := func(b Break) {
		for _, p := range allowed[b.Version] {
			if p == "*" || p == b.Path || b.Path != "" && strings.HasPrefix(b.Path, p+".") {
				return
			}
		}
		out = append(out, b)
	}
	if released.Spec.Scope != current.Spec.Scope {
		add(Break{Version: storageVersion(current), What: fmt.Sprintf("the scope changed from %s to %s", released.Spec.Scope, current.Spec.Scope)})
	}
	was, now := storageVersion(released), storageVersion(current)
	for _, rv := range released.Spec.Versions {
		cv := version(current, rv.Name)
		switch {
		case cv == nil && rv.Name == was:
			add(Break{Version: rv.Name, What: "removed; it was the storage version: resources stored at it would be lost"})
		case cv == nil:
			add(Break{Version: rv.Name, What: "removed: its clients would fail"})
		case rv.Served && !cv.Served:
			add(Break{Version: rv.Name, What: "no longer served: its clients would fail"})
		case rv.Schema != nil && rv.Schema.OpenAPIV3Schema != nil && cv.Schema != nil && cv.Schema.OpenAPIV3Schema != nil:
			for _, b := range compareSchema(*rv.Schema.OpenAPIV3Schema, *cv.Schema.OpenAPIV3Schema, "") {
				b.Version = rv.Name
				add(b)
			}
		}
	}
	if was != "" && now != was && (!slices.Contains(converts, was) || !slices.Contains(converts, now)) {
		add(Break{Version: now, What: fmt.Sprintf("the storage version, was %s, with no conversion between them (templates/<kind>/_from-%s.yaml and _to-%s.yaml)", was, was, was)})
	}
	return out
}

func version(crd *apiextensionsv1.CustomResourceDefinition, name string) *apiextensionsv1.CustomResourceDefinitionVersion {
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Name == name {
			return &crd.Spec.Versions[i]
		}
	}
	return nil
}

// compareSchema lists what the current schema of a field takes away from
// the released one: removed properties, changed types, narrower
// validations, new required fields and rules.
func compareSchema(was, now apiextensionsv1.JSONSchemaProps, path string) []Break {
	var out []Break
	at := func(what string, args ...any) { out = append(out, Break{Path: path, What: fmt.Sprintf(what, args...)}) }
	if was.Type != now.Type {
		at("type changed from %s to %s", orAny(was.Type), orAny(now.Type))
		return out
	}
	if narrowerMin(was.Minimum, now.Minimum) {
		at("minimum raised from %s to %v", bound(was.Minimum), *now.Minimum)
	}
	if narrowerMax(was.Maximum, now.Maximum) {
		at("maximum lowered from %s to %v", bound(was.Maximum), *now.Maximum)
	}
	if narrowerMinInt(was.MinLength, now.MinLength) || narrowerMaxInt(was.MaxLength, now.MaxLength) {
		at("length narrowed from %s to %s", lengths(was.MinLength, was.MaxLength), lengths(now.MinLength, now.MaxLength))
	}
	if narrowerMinInt(was.MinItems, now.MinItems) || narrowerMaxInt(was.MaxItems, now.MaxItems) {
		at("item count narrowed from %s to %s", lengths(was.MinItems, was.MaxItems), lengths(now.MinItems, now.MaxItems))
	}
	if len(now.Enum) > 0 {
		for _, e := range enumOrNone(was.Enum) {
			if !slices.ContainsFunc(now.Enum, func(n apiextensionsv1.JSON) bool { return string(n.Raw) == e }) {
				at("value %s no longer allowed", e)
			}
		}
		if len(was.Enum) == 0 {
			at("now limited to an enum")
		}
	}
	if now.Pattern != "" && now.Pattern != was.Pattern {
		at("pattern %q, was %s", now.Pattern, orNone(was.Pattern))
	}
	if was.Nullable && !now.Nullable {
		at("no longer nullable")
	}
	if now.ExclusiveMinimum && !was.ExclusiveMinimum || now.ExclusiveMaximum && !was.ExclusiveMaximum {
		at("a bound became exclusive")
	}
	if now.Format != was.Format && now.Format != "" {
		at("format %q, was %s", now.Format, orNone(was.Format))
	}
	if narrowerMaxInt(was.MaxProperties, now.MaxProperties) || narrowerMinInt(was.MinProperties, now.MinProperties) {
		at("property count narrowed from %s to %s", lengths(was.MinProperties, was.MaxProperties), lengths(now.MinProperties, now.MaxProperties))
	}
	if was.XPreserveUnknownFields != nil && *was.XPreserveUnknownFields && (now.XPreserveUnknownFields == nil || !*now.XPreserveUnknownFields) {
		at("no longer preserves unknown fields: they would be pruned")
	}
	if listType(was) != listType(now) {
		at("list type %s, was %s", listType(now), listType(was))
	}
	for _, r := range now.Required {
		if !slices.Contains(was.Required, r) {
			out = append(out, Break{Path: join(path, r), What: "now required"})
		}
	}
	for _, rule := range now.XValidations {
		if !slices.ContainsFunc(was.XValidations, func(w apiextensionsv1.ValidationRule) bool { return w.Rule == rule.Rule }) {
			at("new validation rule %q", rule.Rule)
		}
	}
	for _, name := range sortedKeys(was.Properties) {
		np, ok := now.Properties[name]
		if !ok {
			if now.XPreserveUnknownFields == nil || !*now.XPreserveUnknownFields {
				out = append(out, Break{Path: join(path, name), What: "removed (or renamed): its values would be pruned"})
			}
			continue
		}
		out = append(out, compareSchema(was.Properties[name], np, join(path, name))...)
	}
	if was.Items != nil && was.Items.Schema != nil && now.Items != nil && now.Items.Schema != nil {
		out = append(out, compareSchema(*was.Items.Schema, *now.Items.Schema, path+"[]")...)
	}
	if was.AdditionalProperties != nil && was.AdditionalProperties.Schema != nil && now.AdditionalProperties != nil && now.AdditionalProperties.Schema != nil {
		out = append(out, compareSchema(*was.AdditionalProperties.Schema, *now.AdditionalProperties.Schema, path+"{}")...)
	}
	return out
}

func listType(s apiextensionsv1.JSONSchemaProps) string {
	if s.XListType == nil {
		return "atomic"
	}
	return *s.XListType
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func sortedKeys(m map[string]apiextensionsv1.JSONSchemaProps) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func narrowerMin(was, now *float64) bool { return now != nil && (was == nil || *now > *was) }
func narrowerMax(was, now *float64) bool { return now != nil && (was == nil || *now < *was) }
func narrowerMinInt(was, now *int64) bool {
	return now != nil && *now > 0 && (was == nil || *now > *was)
}
func narrowerMaxInt(was, now *int64) bool { return now != nil && (was == nil || *now < *was) }

func bound(b *float64) string {
	if b == nil {
		return "none"
	}
	return fmt.Sprint(*b)
}

func lengths(lo, hi *int64) string {
	s := func(p *int64, none string) string {
		if p == nil {
			return none
		}
		return fmt.Sprint(*p)
	}
	return "[" + s(lo, "0") + ", " + s(hi, "∞") + "]"
}

func enumOrNone(e []apiextensionsv1.JSON) []string {
	out := make([]string, len(e))
	for i, v := range e {
		out[i] = string(v.Raw)
	}
	return out
}

func orAny(t string) string {
	if t == "" {
		return "any"
	}
	return t
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return fmt.Sprintf("%q", s)
}
