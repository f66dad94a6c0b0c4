package render

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

// A kind with several versions converts between them with templates in its
// folder: _from-<version>.yaml renders the hub's spec (and, optionally,
// status) from an object of <version>, _to-<version>.yaml renders
// <version>'s from the hub. The hub is the version of the kind's Go type
// ([Definition.GroupVersionKind]): templates and the status template render
// from it, whatever version a client used. A template's dot is the source
// object as a map (.spec, .status, .metadata); what it renders is a map
// with spec and, optionally, status (else the status is copied as it is).
// Metadata is the object's own. Conversion is pure, like render.
const (
	fromPrefix = "_from-"
	toPrefix   = "_to-"
)

// FieldsOfAnnotation is the prefix of the annotation that keeps, on an
// object converted from a version, the fields of that version the object's
// own version cannot hold (JSON, as a partial object): converting it back
// restores them, so that a round trip loses nothing. Kubernetes' built-in
// types keep such fields the same way.
const FieldsOfAnnotation = "stencil.dev/fields-of-"

// ConversionError is a conversion template's failure.
type ConversionError struct {
	// Kind, From and To say which conversion failed.
	Kind, From, To string
	// File is the template.
	File string
	Err  error
}

func (e *ConversionError) Error() string {
	return fmt.Sprintf("converting %s from %s to %s: %s: %v", e.Kind, e.From, e.To, e.File, e.Err)
}

func (e *ConversionError) Unwrap() error { return e.Err }

// conversions finds the kind's other versions (its spokes) from the
// conversion templates; each needs both directions.
func conversions(fsys fs.FS, hub string) ([]string, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("listing templates: %w", err)
	}
	from, to := map[string]bool{}, map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if v, ok := strings.CutPrefix(strings.TrimSuffix(name, ".yaml"), fromPrefix); ok && strings.HasSuffix(name, ".yaml") {
			from[v] = true
		}
		if v, ok := strings.CutPrefix(strings.TrimSuffix(name, ".yaml"), toPrefix); ok && strings.HasSuffix(name, ".yaml") {
			to[v] = true
		}
	}
	var spokes []string
	for v := range from {
		if !to[v] {
			return nil, fmt.Errorf("%s%s.yaml has no %s%s.yaml: a version converts both ways", fromPrefix, v, toPrefix, v)
		}
		if v == hub {
			return nil, fmt.Errorf("%s%s.yaml: %s is the hub, the version templates render from; conversions are between it and the others", fromPrefix, v, v)
		}
		spokes = append(spokes, v)
	}
	for v := range to {
		if !from[v] {
			return nil, fmt.Errorf("%s%s.yaml has no %s%s.yaml: a version converts both ways", toPrefix, v, fromPrefix, v)
		}
	}
	slices.Sort(spokes)
	return spokes, nil
}

// Hub is the version the kind's templates render from.
func (g Conversion) Hub() string {
	k := g.k
	return k.def.GroupVersionKind.Version
}

// Versions are the kind's versions: the hub, then the others in name order.
func (g Conversion) Versions() []string {
	k := g.k
	return append([]string{g.Hub()}, k.spokes...)
}

// Converts reports whether the kind has several versions.
func (g Conversion) Converts() bool {
	k := g.k
	return len(k.spokes) > 0
}

// Convert returns obj (a custom resource of the kind, at any of its
// versions) at version to: through the hub, by the conversion templates.
// The fields a version cannot hold are kept in an annotation (see
// [FieldsOfAnnotation]) and restored on the way back. It is pure. It is
// [Conversion.ConvertWith] without a key or schemas: for tests and tools, where
// nobody else writes the objects.
func (g Conversion) Convert(obj map[string]any, to string) (map[string]any, error) {
	return g.ConvertWith(obj, to, ConvertOptions{})
}

// ConvertOptions are what a conversion that serves the API server needs
// beyond the templates.
type ConvertOptions struct {
	// Key signs the fields a conversion keeps in an annotation (see
	// [FieldsOfAnnotation]), and only fields it signed are restored: a
	// client writes the annotation, and could otherwise store any value
	// the schema of the storage version forbids. Nil: the fields are
	// neither signed nor checked (one process that no one else writes to:
	// a local run).
	Key []byte
	// Schema prunes and checks objects of the kind at each version, as the
	// API server does; nil: none. A field the target version's schema
	// would prune is kept like one the template drops, and kept fields
	// whose restoring breaks the schema are not restored.
	Schema VersionSchema
	// Ignored, when not nil, is told of each annotation of kept fields
	// that a conversion did not restore, and why.
	Ignored func(IgnoredKept)
}

// IgnoredKept is an annotation of kept fields that a conversion did not
// restore.
type IgnoredKept struct {
	// Annotation is its key.
	Annotation string
	// Reason is why, in a word: one of the Kept* reasons.
	Reason string
	// Message says why, to a person.
	Message string
}

// Why a conversion did not restore an annotation of kept fields.
const (
	KeptTooLarge     = "TooLarge"
	KeptMalformed    = "Malformed"
	KeptNotSigned    = "NotSigned"
	KeptBreaksSchema = "BreaksSchema"
)

// VersionSchema is the schema of a kind's CustomResourceDefinition at each
// of its versions (package render/schema implements it).
type VersionSchema interface {
	// Prune removes from obj, in place, the fields the schema of its
	// version does not declare.
	Prune(obj map[string]any)
	// Problems lists how obj breaks the schema of its version.
	Problems(obj map[string]any) []string
}

// ConvertWith is [Conversion.Convert] with o's key and schemas.
func (g Conversion) ConvertWith(obj map[string]any, to string, o ConvertOptions) (map[string]any, error) {
	k := g.k
	from, err := g.versionOf(obj)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(g.Versions(), to) {
		return nil, fmt.Errorf("%s has no version %s (it has %s)", k.def.GroupVersionKind.Kind, to, strings.Join(g.Versions(), ", "))
	}
	out := runtime.DeepCopyJSON(obj)
	if from != g.Hub() {
		if out, err = g.step(out, from, g.Hub(), o); err != nil {
			return nil, err
		}
	}
	if to != g.Hub() {
		if out, err = g.step(out, g.Hub(), to, o); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// versionOf is the version of obj, which must be of the kind.
func (g Conversion) versionOf(obj map[string]any) (string, error) {
	k := g.k
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return "", fmt.Errorf("apiVersion %q: %w", apiVersion, err)
	}
	want := k.def.GroupVersionKind
	if gv.Group != want.Group || kind != want.Kind {
		return "", fmt.Errorf("%s %s is not a %s", apiVersion, kind, want.GroupKind())
	}
	if !slices.Contains(k.Conversion().Versions(), gv.Version) {
		return "", fmt.Errorf("%s has no version %s (it has %s)", want.Kind, gv.Version, strings.Join(k.Conversion().Versions(), ", "))
	}
	return gv.Version, nil
}

// conversionFile is the template that converts from one version to the
// other, one of which is the hub.
func (g Conversion) conversionFile(from, to string) string {
	k := g.k
	if to == k.Conversion().Hub() {
		return fromPrefix + from + ".yaml"
	}
	return toPrefix + to + ".yaml"
}

// step converts src from one version to the next (one of them the hub):
// the template, then the fields kept for to restored, then the fields of
// from that to cannot hold kept.
func (g Conversion) step(src map[string]any, from, to string, o ConvertOptions) (map[string]any, error) {
	out, err := g.convertOnce(src, from, to)
	if err != nil {
		return nil, err
	}
	o.prune(out)
	key := FieldsOfAnnotation + to
	if data, ok := annotation(src, key); ok {
		setAnnotation(out, key, "")
		if restored, why := g.restoreKept(out, to, data, o); why.Reason != "" {
			why.Annotation = key
			o.ignored(why)
		} else {
			out = restored
		}
	}
	back, err := g.convertOnce(out, to, from)
	if err != nil {
		return nil, err
	}
	o.prune(back)
	key = FieldsOfAnnotation + from
	setAnnotation(out, key, "")
	if lost := lostFields(src, back); len(lost) > 0 {
		data, err := g.sealKept(from, lost, o.Key)
		if err != nil {
			return nil, fmt.Errorf("keeping the fields %s cannot hold: %w", to, err)
		}
		setAnnotation(out, key, data)
	}
	return out, nil
}

// maxKept is the largest annotation of kept fields restored: the API
// server takes no more for all of an object's annotations.
const maxKept = 256 << 10

// keptAnnotation is the annotation's value: the fields, as JSON, and their
// signature.
type keptAnnotation struct {
	Fields json.RawMessage `json:"fields"`
	// MAC is the fields' HMAC-SHA256 (base64), by the webhook's key, for
	// the kind and the version the fields are of (see [Kind.mac]).
	MAC string `json:"mac,omitempty"`
}

// sealKept is the annotation that keeps fields of version: the fields and,
// with a key, their signature.
func (g Conversion) sealKept(version string, fields []keptField, key []byte) (string, error) {
	raw, err := json.Marshal(fields)
	if err != nil {
		return "", err
	}
	a := keptAnnotation{Fields: raw}
	if key != nil {
		a.MAC = base64.StdEncoding.EncodeToString(g.mac(key, version, raw))
	}
	out, err := json.Marshal(a)
	return string(out), err
}

// mac signs the kept fields raw of the kind's version.
func (g Conversion) mac(key []byte, version string, raw []byte) []byte {
	k := g.k
	h := hmac.New(sha256.New, key)
	gk := k.def.GroupVersionKind.GroupKind()
	_, _ = fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00", FieldsOfAnnotation, gk.Group, gk.Kind, version)
	h.Write(raw)
	return h.Sum(nil)
}

// restoreKept is out (the object at version) with the kept fields of the
// annotation data restored; or why not: the annotation is too large,
// malformed or not signed by the key, or restoring it would break
// version's schema. Only fields under spec are restored: status is the
// operator's to write.
func (g Conversion) restoreKept(out map[string]any, version, data string, o ConvertOptions) (map[string]any, IgnoredKept) {
	if len(data) > maxKept {
		return nil, IgnoredKept{Reason: KeptTooLarge, Message: fmt.Sprintf("it is larger than %d KiB", maxKept>>10)}
	}
	var a keptAnnotation
	if err := json.Unmarshal([]byte(data), &a); err != nil || a.Fields == nil {
		return nil, IgnoredKept{Reason: KeptMalformed, Message: "it is not stencil's (a JSON object of fields and their signature)"}
	}
	if o.Key != nil {
		mac, err := base64.StdEncoding.DecodeString(a.MAC)
		if err != nil || !hmac.Equal(mac, g.mac(o.Key, version, a.Fields)) {
			return nil, IgnoredKept{Reason: KeptNotSigned, Message: "its signature is not stencil's: a client wrote it"}
		}
	}
	var fields []keptField
	if err := json.Unmarshal(a.Fields, &fields); err != nil {
		return nil, IgnoredKept{Reason: KeptMalformed, Message: "its fields are not a JSON list of kept fields"}
	}
	fields = slices.DeleteFunc(fields, func(f keptField) bool { return len(f.Path) == 0 || f.Path[0] != "spec" })
	restored := runtime.DeepCopyJSON(out)
	restore(restored, fields)
	if o.Schema != nil {
		before := o.Schema.Problems(out)
		for _, p := range o.Schema.Problems(restored) {
			if !slices.Contains(before, p) {
				return nil, IgnoredKept{Reason: KeptBreaksSchema, Message: "restoring it breaks the schema of " + version + ": " + p}
			}
		}
	}
	return restored, IgnoredKept{}
}

func (o ConvertOptions) prune(obj map[string]any) {
	if o.Schema != nil {
		o.Schema.Prune(obj)
	}
}

func (o ConvertOptions) ignored(why IgnoredKept) {
	if o.Ignored != nil {
		o.Ignored(why)
	}
}

// keptField is a field the annotation keeps: where it is and its value.
// Changed marks a field the other version holds, but otherwise (a lossy
// mapping); Back is what the round trip gave back for it then.
type keptField struct {
	Path    []string `json:"path"`
	Value   any      `json:"value"`
	Changed bool     `json:"changed,omitempty"`
	Back    any      `json:"back,omitempty"`
}

// lostFields are the fields of orig's spec that back lacks or holds
// otherwise: what a round trip lost. A field back lacks is kept whole, at
// the first key back lacks. Status is not kept: the operator writes it
// again.
func lostFields(orig, back map[string]any) []keptField {
	var out []keptField
	for _, part := range []string{"spec"} {
		v, ok := orig[part]
		if !ok {
			continue
		}
		if b, ok := back[part]; ok {
			out = appendLost(out, v, b, []string{part})
		} else {
			out = append(out, keptField{Path: []string{part}, Value: v})
		}
	}
	return out
}

func appendLost(out []keptField, orig, back any, path []string) []keptField {
	om, ook := orig.(map[string]any)
	bm, bok := back.(map[string]any)
	if !ook || !bok {
		if !jsonEqual(orig, back) {
			out = append(out, keptField{Path: path, Value: orig, Changed: true, Back: back})
		}
		return out
	}
	for _, key := range slices.Sorted(maps.Keys(om)) {
		p := append(slices.Clip(path), key)
		if bv, ok := bm[key]; ok {
			out = appendLost(out, om[key], bv, p)
		} else {
			out = append(out, keptField{Path: p, Value: om[key]})
		}
	}
	return out
}

// restore puts kept fields back into obj: a field obj lacks, where its
// parent is still there (a client that removed the parent removed the
// field too); a field held otherwise, where obj still holds what the round
// trip gave back for it (else the client changed it).
func restore(obj map[string]any, fields []keptField) {
	for _, f := range fields {
		if len(f.Path) == 0 {
			continue
		}
		parent := obj
		for _, key := range f.Path[:len(f.Path)-1] {
			parent, _ = parent[key].(map[string]any)
			if parent == nil {
				break
			}
		}
		if parent == nil {
			continue
		}
		last := f.Path[len(f.Path)-1]
		cur, present := parent[last]
		switch {
		case !present && !f.Changed:
			parent[last] = runtime.DeepCopyJSONValue(normalise(f.Value))
		case present && f.Changed && jsonEqual(cur, normalise(f.Back)):
			parent[last] = runtime.DeepCopyJSONValue(normalise(f.Value))
		}
	}
}

// normalise turns a decoded JSON value's whole numbers into int64, as a
// YAML or Kubernetes decode reads them.
func normalise(v any) any {
	switch t := v.(type) {
	case float64:
		if t == float64(int64(t)) {
			return int64(t)
		}
	case map[string]any:
		for k, e := range t {
			t[k] = normalise(e)
		}
	case []any:
		for i, e := range t {
			t[i] = normalise(e)
		}
	}
	return v
}

// convertOnce runs one conversion template: the converted object, with
// nothing kept or restored.
func (g Conversion) convertOnce(src map[string]any, from, to string) (map[string]any, error) {
	k := g.k
	file := g.conversionFile(from, to)
	fail := func(err error) error {
		return &ConversionError{Kind: k.def.GroupVersionKind.Kind, From: from, To: to, File: file, Err: err}
	}
	run, err := k.execution(k.limits.Bytes, "rendered bytes")
	if err != nil {
		return nil, fail(err)
	}
	defer k.runs.put(run)
	raw, err := run.execute(file, src)
	if err != nil {
		return nil, fail(err)
	}
	if err := run.b.check(); err != nil {
		return nil, fail(err)
	}
	rendered := map[string]any{}
	data, err := yaml.YAMLToJSON(raw)
	if err == nil {
		err = utiljson.Unmarshal(data, &rendered) // whole numbers as int64, as Kubernetes decodes them
	}
	if err != nil {
		return nil, fail(fmt.Errorf("output is not a YAML map: %w", err))
	}
	for key := range rendered {
		if key != "spec" && key != "status" {
			return nil, fail(fmt.Errorf("renders %q: a conversion renders spec and status only (metadata is the object's own)", key))
		}
	}
	out := runtime.DeepCopyJSON(src)
	out["apiVersion"] = schema.GroupVersion{Group: k.def.GroupVersionKind.Group, Version: to}.String()
	delete(out, "spec")
	if spec, ok := rendered["spec"]; ok && spec != nil {
		out["spec"] = spec
	}
	if status, ok := rendered["status"]; ok {
		if status == nil {
			delete(out, "status")
		} else {
			out["status"] = status
		}
	}
	return out, nil
}

// diffTree is the part of a that b does not hold equal: nil when b holds
// all of it. Maps are compared key by key; anything else whole.
func diffTree(a, b any) any {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if !aok || !bok {
		if jsonEqual(a, b) {
			return nil
		}
		return a
	}
	out := map[string]any{}
	for key, av := range am {
		bv, ok := bm[key]
		if !ok {
			out[key] = av
			continue
		}
		if d := diffTree(av, bv); d != nil {
			out[key] = d
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// jsonEqual compares two JSON values, numbers by value.
func jsonEqual(a, b any) bool {
	if an, ok := number(a); ok {
		bn, ok := number(b)
		return ok && an == bn
	}
	am, aok := a.([]any)
	bm, bok := b.([]any)
	if aok && bok {
		if len(am) != len(bm) {
			return false
		}
		for i := range am {
			if !jsonEqual(am[i], bm[i]) {
				return false
			}
		}
		return true
	}
	if amap, ok := a.(map[string]any); ok {
		bmap, ok := b.(map[string]any)
		return ok && diffTree(amap, bmap) == nil && diffTree(bmap, amap) == nil
	}
	return reflect.DeepEqual(a, b)
}

// number reads a JSON number (a YAML decode gives int64 or float64).
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case float64:
		return n, true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

func annotation(obj map[string]any, key string) (string, bool) {
	meta, _ := obj["metadata"].(map[string]any)
	ann, _ := meta["annotations"].(map[string]any)
	v, ok := ann[key].(string)
	return v, ok
}

// setAnnotation sets an annotation on obj, or removes it when value is "".
func setAnnotation(obj map[string]any, key, value string) {
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil {
		if value == "" {
			return
		}
		meta = map[string]any{}
		obj["metadata"] = meta
	}
	ann, _ := meta["annotations"].(map[string]any)
	if value == "" {
		delete(ann, key)
		if ann != nil && len(ann) == 0 {
			delete(meta, "annotations")
		}
		return
	}
	if ann == nil {
		ann = map[string]any{}
		meta["annotations"] = ann
	}
	ann[key] = value
}

// RoundTripLoss converts obj (at version from) to version to and back
// without keeping anything in annotations, and returns the fields of obj
// the round trip lost ("spec.size"), less those the kind declares dropped
// for that pair of versions: what lint calls uncovered. With a schema (not
// nil), each version's output is pruned as the API server would prune it:
// a field a template copies into a version whose schema lacks it is lost
// too.
func (g Conversion) RoundTripLoss(obj map[string]any, to string, schema VersionSchema) ([]string, error) {
	o := ConvertOptions{Schema: schema}
	from, err := g.versionOf(obj)
	if err != nil {
		return nil, err
	}
	there, back := runtime.DeepCopyJSON(obj), map[string]any(nil)
	path := g.path(from, to)
	for i := 1; i < len(path); i++ {
		if there, err = g.convertOnce(there, path[i-1], path[i]); err != nil {
			return nil, err
		}
		o.prune(there)
	}
	back = there
	for i := len(path) - 1; i > 0; i-- {
		if back, err = g.convertOnce(back, path[i], path[i-1]); err != nil {
			return nil, err
		}
		o.prune(back)
	}
	var lost []string
	for _, f := range lostFields(obj, back) {
		if p := strings.Join(f.Path, "."); !g.dropped(from, to, p) {
			lost = append(lost, p)
		}
	}
	slices.Sort(lost)
	return lost, nil
}

// path is the versions a conversion passes through.
func (g Conversion) path(from, to string) []string {
	k := g.k
	p := []string{from}
	if from != k.Conversion().Hub() && to != k.Conversion().Hub() {
		p = append(p, k.Conversion().Hub())
	}
	return append(p, to)
}

// dropped: the kind declares that field p of version from is dropped on
// the way to version to (declared under either version).
func (g Conversion) dropped(from, to, p string) bool {
	k := g.k
	for _, v := range []string{from, to} {
		for _, d := range k.declaration.Conversion[v].Dropped {
			if d == p || strings.HasPrefix(p, d+".") {
				return true
			}
		}
	}
	return false
}
