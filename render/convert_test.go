package render_test

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/internal/testing/testkind"
	"github.com/stencil-operator/stencil/render"
	"github.com/stencil-operator/stencil/templates"
)

// converting is a Widget with a hub v2 and a spoke v1: spec.size became
// spec.replicas, spec.autoscaled became spec.autoscaling.enabled, v2 added
// spec.tls and dropped v1's spec.legacy.
func converting(t *testing.T, declaration string, from string) *render.Kind {
	t.Helper()
	def := testkind.Widget()
	def.GroupVersionKind.Version = "v2"
	def.Templates = fstest.MapFS{
		"_kind.yaml":    {Data: []byte("owns:\n- {apiVersion: v1, kind: ConfigMap}\n" + declaration)},
		"cm.yaml":       {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n")},
		"_from-v1.yaml": {Data: []byte(from)},
		"_to-v1.yaml": {Data: []byte(`spec:
  size: {{ .spec.replicas }}
  {{- with dig "autoscaling" "enabled" nil .spec }}
  autoscaled: {{ . }}
  {{- end }}
`)},
	}
	k, err := render.Load(render.Definition(def))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

const fromV1 = `spec:
  replicas: {{ .spec.size }}
  {{- with index .spec "autoscaled" }}
  autoscaling: {enabled: {{ . }}}
  {{- end }}
`

func object(t *testing.T, src string) map[string]any {
	t.Helper()
	data, err := yaml.YAMLToJSON([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	obj := map[string]any{}
	if err := utiljson.Unmarshal(data, &obj); err != nil { // whole numbers as int64, as the webhook reads them
		t.Fatal(err)
	}
	return obj
}

func TestConvert(t *testing.T) {
	k := converting(t, "", fromV1)
	if got, want := k.Conversion().Versions(), []string{"v2", "v1"}; !cmp.Equal(got, want) {
		t.Errorf("Versions() = %v, want %v", got, want)
	}
	tests := []struct {
		name, in, to, want string
	}{{
		name: "spoke to hub",
		in:   "apiVersion: test.stencil.dev/v1\nkind: Widget\nmetadata: {name: w, labels: {a: b}}\nspec: {size: 3, autoscaled: true}\nstatus: {phase: Ready}",
		to:   "v2",
		want: "apiVersion: test.stencil.dev/v2\nkind: Widget\nmetadata: {name: w, labels: {a: b}}\nspec: {replicas: 3, autoscaling: {enabled: true}}\nstatus: {phase: Ready}",
	}, {
		name: "hub to spoke",
		in:   "apiVersion: test.stencil.dev/v2\nkind: Widget\nmetadata: {name: w}\nspec: {replicas: 3}",
		to:   "v1",
		want: "apiVersion: test.stencil.dev/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: 3}",
	}, {
		name: "a field the spoke cannot hold is kept in an annotation",
		in:   "apiVersion: test.stencil.dev/v2\nkind: Widget\nmetadata: {name: w}\nspec: {replicas: 3, tls: {secret: s}}",
		to:   "v1",
		want: "apiVersion: test.stencil.dev/v1\nkind: Widget\nmetadata: {name: w, annotations: {stencil.dev/fields-of-v2: '{\"fields\":[{\"path\":[\"spec\",\"tls\"],\"value\":{\"secret\":\"s\"}}]}'}}\nspec: {size: 3}",
	}, {
		name: "and restored on the way back",
		in:   "apiVersion: test.stencil.dev/v1\nkind: Widget\nmetadata: {name: w, annotations: {stencil.dev/fields-of-v2: '{\"fields\":[{\"path\":[\"spec\",\"tls\"],\"value\":{\"secret\":\"s\"}}]}'}}\nspec: {size: 4}",
		to:   "v2",
		want: "apiVersion: test.stencil.dev/v2\nkind: Widget\nmetadata: {name: w}\nspec: {replicas: 4, tls: {secret: s}}",
	}, {
		name: "a kept field never overrides what the client wrote",
		in:   "apiVersion: test.stencil.dev/v1\nkind: Widget\nmetadata: {name: w, annotations: {stencil.dev/fields-of-v2: '{\"fields\":[{\"path\":[\"spec\",\"replicas\"],\"value\":9,\"changed\":true,\"back\":8}]}'}}\nspec: {size: 4}",
		to:   "v2",
		want: "apiVersion: test.stencil.dev/v2\nkind: Widget\nmetadata: {name: w}\nspec: {replicas: 4}",
	}, {
		name: "same version",
		in:   "apiVersion: test.stencil.dev/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: 1, legacy: x}",
		to:   "v1",
		want: "apiVersion: test.stencil.dev/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: 1, legacy: x}",
	}, {
		name: "a spoke field the hub cannot hold",
		in:   "apiVersion: test.stencil.dev/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: 1, legacy: x}",
		to:   "v2",
		want: "apiVersion: test.stencil.dev/v2\nkind: Widget\nmetadata: {name: w, annotations: {stencil.dev/fields-of-v1: '{\"fields\":[{\"path\":[\"spec\",\"legacy\"],\"value\":\"x\"}]}'}}\nspec: {replicas: 1}",
	}, {
		name: "a kept field whose parent the client removed is not put back",
		in:   "apiVersion: test.stencil.dev/v1\nkind: Widget\nmetadata: {name: w, annotations: {stencil.dev/fields-of-v2: '{\"fields\":[{\"path\":[\"spec\",\"autoscaling\",\"max\"],\"value\":3}]}'}}\nspec: {size: 4}",
		to:   "v2",
		want: "apiVersion: test.stencil.dev/v2\nkind: Widget\nmetadata: {name: w}\nspec: {replicas: 4}",
	}, {
		name: "a value held otherwise comes back when the client left it",
		in:   "apiVersion: test.stencil.dev/v1\nkind: Widget\nmetadata: {name: w, annotations: {stencil.dev/fields-of-v2: '{\"fields\":[{\"path\":[\"spec\",\"replicas\"],\"value\":9,\"changed\":true,\"back\":4}]}'}}\nspec: {size: 4}",
		to:   "v2",
		// and the spoke's size, which 9 does not give back, is kept in turn
		want: "apiVersion: test.stencil.dev/v2\nkind: Widget\nmetadata: {name: w, annotations: {stencil.dev/fields-of-v1: '{\"fields\":[{\"path\":[\"spec\",\"size\"],\"value\":4,\"changed\":true,\"back\":9}]}'}}\nspec: {replicas: 9}",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := k.Conversion().Convert(object(t, tt.in), tt.to)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(object(t, tt.want), got); diff != "" {
				t.Errorf("Convert (-want +got):\n%s", diff)
			}
		})
	}
}

// TestConvertRoundTrip: spoke → hub → spoke and hub → spoke → hub give the
// object back, fields the other version cannot hold included.
func TestConvertRoundTrip(t *testing.T) {
	k := converting(t, "", fromV1)
	for _, in := range []string{
		"apiVersion: test.stencil.dev/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: 1, legacy: x, autoscaled: true}",
		"apiVersion: test.stencil.dev/v2\nkind: Widget\nmetadata: {name: w, annotations: {x: y}}\nspec: {replicas: 2, tls: {secret: s}, autoscaling: {enabled: true, max: 3}}\nstatus: {phase: Ready}",
	} {
		obj := object(t, in)
		from := strings.TrimPrefix(obj["apiVersion"].(string), "test.stencil.dev/")
		to := map[string]string{"v1": "v2", "v2": "v1"}[from]
		there, err := k.Conversion().Convert(obj, to)
		if err != nil {
			t.Fatal(err)
		}
		back, err := k.Conversion().Convert(there, from)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(obj, back); diff != "" {
			t.Errorf("%s → %s → %s (-want +got):\n%s", from, to, from, diff)
		}
	}
}

// widgetSchema is a VersionSchema of the converting Widget: v2's spec
// holds replicas (at most 100), tls and autoscaling; v1's size, autoscaled
// and legacy. Prune drops other spec fields, as the API server would.
type widgetSchema struct{}

func (widgetSchema) fields(obj map[string]any) []string {
	if strings.HasSuffix(obj["apiVersion"].(string), "/v2") {
		return []string{"replicas", "tls", "autoscaling"}
	}
	return []string{"size", "autoscaled", "legacy"}
}

func (s widgetSchema) Prune(obj map[string]any) {
	spec, _ := obj["spec"].(map[string]any)
	for key := range spec {
		if !slices.Contains(s.fields(obj), key) {
			delete(spec, key)
		}
	}
}

func (widgetSchema) Problems(obj map[string]any) []string {
	spec, _ := obj["spec"].(map[string]any)
	if n, ok := spec["replicas"].(int64); ok && n > 100 {
		return []string{".spec.replicas: must be at most 100"}
	}
	return nil
}

// TestConvertKeptFieldsAreStencils: with a key, the kept fields that a
// conversion restores are only those it signed; with a schema, fields the
// target version prunes are kept too, and kept fields that would break its
// schema are not restored. Status is never restored. A kept annotation that
// is not restored is reported, and the conversion goes on without it.
func TestConvertKeptFieldsAreStencils(t *testing.T) {
	k := converting(t, "", fromV1)
	key := []byte("0123456789abcdef0123456789abcdef")
	var ignored []string
	o := render.ConvertOptions{Key: key, Schema: widgetSchema{}, Ignored: func(i render.IgnoredKept) { ignored = append(ignored, i.Annotation+": "+i.Message) }}
	hub := object(t, "apiVersion: test.stencil.dev/v2\nkind: Widget\nmetadata: {name: w}\nspec: {replicas: 3, tls: {secret: s}}")
	spoke, err := k.Conversion().ConvertWith(hub, "v1", o)
	if err != nil {
		t.Fatal(err)
	}
	back, err := k.Conversion().ConvertWith(spoke, "v2", o)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(hub, back); diff != "" || len(ignored) > 0 {
		t.Fatalf("signed kept fields: round trip (-want +got):\n%s\nignored: %v", diff, ignored)
	}

	forged := func(fields string) map[string]any {
		obj := object(t, "apiVersion: test.stencil.dev/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: 4}")
		obj["metadata"].(map[string]any)["annotations"] = map[string]any{render.FieldsOfAnnotation + "v2": fields}
		return obj
	}
	tests := []struct {
		name, annotation, why string
		opts                  render.ConvertOptions
	}{
		{"unsigned", `{"fields":[{"path":["spec","replicas"],"value":100000,"changed":true,"back":4}]}`, "its signature is not stencil's", o},
		{"a wrong signature", `{"fields":[{"path":["spec","tls"],"value":{"secret":"x"}}],"mac":"AAAA"}`, "its signature is not stencil's", o},
		{"an older stencil's list", `[{"path":["spec","tls"],"value":{"secret":"x"}}]`, "is not stencil's", o},
		{"malformed", `{"fields":`, "is not stencil's", o},
		{"oversized", `{"fields":[{"path":["spec","tls"],"value":"` + strings.Repeat("x", 300<<10) + `"}]}`, "larger than", o},
		// Without a key (a local run), kept fields are restored only
		// within the schema.
		{"past the schema, without a key", `{"fields":[{"path":["spec","replicas"],"value":100000,"changed":true,"back":4}]}`, "breaks the schema of v2", render.ConvertOptions{Schema: widgetSchema{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ignored = nil
			tt.opts.Ignored = func(i render.IgnoredKept) { ignored = append(ignored, i.Annotation+": "+i.Message) }
			got, err := k.Conversion().ConvertWith(forged(tt.annotation), "v2", tt.opts)
			if err != nil {
				t.Fatalf("the conversion failed: %v; want it to go on without the annotation", err)
			}
			spec := got["spec"].(map[string]any)
			if spec["replicas"] != int64(4) || spec["tls"] != nil {
				t.Errorf("spec %v: the forged fields were restored", spec)
			}
			if len(ignored) != 1 || !strings.Contains(ignored[0], tt.why) {
				t.Errorf("reported %q, want one saying %q", ignored, tt.why)
			}
		})
	}

	t.Run("status is not kept nor restored", func(t *testing.T) {
		ignored = nil
		obj := forged(`{"fields":[{"path":["status","phase"],"value":"Forged"}]}`)
		obj["status"] = map[string]any{"phase": "Real"}
		got, err := k.Conversion().ConvertWith(obj, "v2", render.ConvertOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if phase := got["status"].(map[string]any)["phase"]; phase != "Real" {
			t.Errorf("status.phase %v, want Real", phase)
		}
	})

	t.Run("a field the target schema prunes is kept", func(t *testing.T) {
		// The template copies v2's spec into v1 whole; v1's schema prunes
		// replicas and tls, which only the annotation keeps.
		copying := render.ConvertOptions{Key: key, Schema: widgetSchema{}}
		in := object(t, "apiVersion: test.stencil.dev/v2\nkind: Widget\nmetadata: {name: w}\nspec: {replicas: 3, tls: {secret: s}}")
		there, err := copyingKind(t).Conversion().ConvertWith(in, "v1", copying)
		if err != nil {
			t.Fatal(err)
		}
		if tls := there["spec"].(map[string]any)["tls"]; tls != nil {
			t.Errorf("v1 holds spec.tls %v, which its schema prunes", tls)
		}
		back, err := copyingKind(t).Conversion().ConvertWith(there, "v2", copying)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(in, back); diff != "" {
			t.Errorf("round trip through a version whose schema prunes a copied field (-want +got):\n%s", diff)
		}
	})
}

// copyingKind converts between v2 and v1 by copying the spec whole, with
// size or replicas added: templates that rely on the schema to drop what a
// version lacks.
func copyingKind(t *testing.T) *render.Kind {
	t.Helper()
	def := testkind.Widget()
	def.GroupVersionKind.Version = "v2"
	def.Templates = fstest.MapFS{
		"_kind.yaml":    {Data: []byte("owns:\n- {apiVersion: v1, kind: ConfigMap}\n")},
		"cm.yaml":       {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n")},
		"_from-v1.yaml": {Data: []byte("spec:\n  {{- with omit .spec \"size\" }}{{ toYaml . | nindent 2 }}{{ end }}\n  replicas: {{ .spec.size }}\n")},
		"_to-v1.yaml":   {Data: []byte("spec:\n  {{- with omit .spec \"replicas\" }}{{ toYaml . | nindent 2 }}{{ end }}\n  size: {{ .spec.replicas }}\n")},
	}
	k, err := render.Load(render.Definition(def))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestRoundTripLoss: what a round trip loses without the annotation is
// reported, less what the kind declares dropped.
func TestRoundTripLoss(t *testing.T) {
	obj := object(t, "apiVersion: test.stencil.dev/v2\nkind: Widget\nmetadata: {name: w}\nspec: {replicas: 2, tls: {secret: s}, autoscaling: {enabled: true, max: 3}}")
	tests := []struct {
		name, declaration string
		want              []string
	}{
		{"undeclared", "", []string{"spec.autoscaling.max", "spec.tls"}},
		{"declared", "conversion:\n  v1: {dropped: [spec.tls, spec.autoscaling.max]}\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lost, err := converting(t, tt.declaration, fromV1).Conversion().RoundTripLoss(obj, "v1", nil)
			if err != nil {
				t.Fatal(err)
			}
			if !cmp.Equal(lost, tt.want) {
				t.Errorf("RoundTripLoss = %v, want %v", lost, tt.want)
			}
		})
	}
}

// TestRoundTripLossSeesPruning: a field a template copies into a version
// whose schema lacks it is pruned by the API server: with the schemas, the
// round trip reports it lost.
func TestRoundTripLossSeesPruning(t *testing.T) {
	obj := object(t, "apiVersion: test.stencil.dev/v2\nkind: Widget\nmetadata: {name: w}\nspec: {replicas: 2, tls: {secret: s}}")
	k := copyingKind(t)
	if lost, err := k.Conversion().RoundTripLoss(obj, "v1", nil); err != nil || len(lost) != 0 {
		t.Fatalf("without the schemas: lost %v (%v), want nothing: the copy holds spec.tls", lost, err)
	}
	lost, err := k.Conversion().RoundTripLoss(obj, "v1", widgetSchema{})
	if err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(lost, []string{"spec.tls"}) {
		t.Errorf("with the schemas: lost %v, want [spec.tls], which v1's schema prunes", lost)
	}
}

// TestConvertFails: a template that fails names the kind, the versions and
// the template.
func TestConvertFails(t *testing.T) {
	k := converting(t, "", `spec: {{ fail "size is gone" }}`)
	_, err := k.Conversion().Convert(object(t, "apiVersion: test.stencil.dev/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: 1}"), "v2")
	var cerr *render.ConversionError
	if !errors.As(err, &cerr) || cerr.File != "_from-v1.yaml" || cerr.From != "v1" || cerr.To != "v2" || !strings.Contains(err.Error(), "size is gone") {
		t.Errorf("Convert: %v, want a ConversionError of _from-v1.yaml v1 → v2 saying why", err)
	}
	k = converting(t, "", "metadata: {name: x}\n")
	if _, err := k.Conversion().Convert(object(t, "apiVersion: test.stencil.dev/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: 1}"), "v2"); err == nil || !strings.Contains(err.Error(), "spec and status only") {
		t.Errorf("a conversion that renders metadata: %v", err)
	}
	if _, err := k.Conversion().Convert(object(t, "apiVersion: test.stencil.dev/v3\nkind: Widget\nspec: {}"), "v2"); err == nil {
		t.Error("converting from a version the kind has not: no error")
	}
}

// TestLoadRefusesOneWayConversion: a version converts both ways, and a
// declaration names only versions the kind has.
func TestLoadRefusesOneWayConversion(t *testing.T) {
	def := testkind.Widget()
	for name, files := range map[string]fstest.MapFS{
		"has no _to-v0.yaml":             {"_from-v0.yaml": {Data: []byte("spec: {}")}},
		"has no _from-v0.yaml":           {"_to-v0.yaml": {Data: []byte("spec: {}")}},
		"no conversion templates for v9": {"_kind.yaml": {Data: []byte("owns: [{apiVersion: v1, kind: ConfigMap}]\nconversion: {v9: {dropped: [spec.x]}}")}},
	} {
		fsys := fstest.MapFS{"_kind.yaml": {Data: []byte("owns: [{apiVersion: v1, kind: ConfigMap}]")}, "cm.yaml": {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n")}}
		maps.Copy(fsys, files)
		def.Templates = fsys
		if _, err := render.Load(render.Definition(def)); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("Load: %v, want an error saying %q", err, name)
		}
	}
}

// BenchmarkConvert: one spoke → hub conversion of the shipped Memcached
// (go test ./render -bench Convert).
func BenchmarkConvert(b *testing.B) {
	var k *render.Kind
	for _, def := range templates.Kinds {
		if def.GroupVersionKind.Kind == "Memcached" {
			var err error
			if k, err = render.Load(render.Definition(def)); err != nil {
				b.Fatal(err)
			}
		}
	}
	obj := map[string]any{"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
		"metadata": map[string]any{"name": "m", "namespace": "default"}, "spec": map[string]any{"size": int64(3), "autoscaled": true, "driftPolicy": "Report"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := k.Conversion().Convert(obj, "v1"); err != nil {
			b.Fatal(err)
		}
	}
}
