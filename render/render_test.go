package render_test

import (
	"strings"
	"testing"
	"testing/fstest"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/internal/testing/testkind"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
	"github.com/stencil-operator/stencil/render"
)

func widget(spec testv1alpha1.WidgetSpec) *testv1alpha1.Widget {
	return &testv1alpha1.Widget{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "team-a", UID: "uid-1"},
		Spec:       spec,
	}
}

// TestRenderRules covers what render refuses, each with a kind whose one
// template breaks one rule, and the message the user gets.
func TestRenderRules(t *testing.T) {
	tests := []struct {
		name     string
		template string
		wantErr  string // empty: must succeed
	}{
		{"declared type in own namespace", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n", ""},
		{"undeclared type", "apiVersion: v1\nkind: Secret\nmetadata: {name: a}\n", `x.yaml: Secret "a": type /v1, Kind=Secret is not declared in _kind.yaml`},
		{"other namespace", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: kube-system}\n", `namespace "kube-system" is not the custom resource's namespace "team-a", nor one _kind.yaml declares under namespaces`},
		{"a declared namespace", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: monitoring}\n", ""},
		{"invalid name", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: Not_Valid}\n", `ConfigMap "Not_Valid": invalid name`},
		{"rendered twice", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n", "rendered twice"},
		{"not an object", "just: a map\n", "x.yaml: output document 1 is not a Kubernetes object"},
		{"invalid yaml", "a: b: c\n", "x.yaml: output document 1 is not valid YAML"},
		{"missing key", "{{ .Missing }}", `x.yaml: template: x.yaml:1:3: executing "x.yaml" at <.Missing>`},
		{"empty documents are skipped", "---\n---\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kind, err := render.Load(render.Definition{
				GroupVersionKind: testv1alpha1.GroupVersion.WithKind("Widget"),
				New:              func() v1alpha1.Object { return &testv1alpha1.Widget{} },
				Templates: fstest.MapFS{
					"_kind.yaml": {Data: []byte("owns:\n- {apiVersion: v1, kind: ConfigMap}\nnamespaces: [monitoring]\n")},
					"x.yaml":     {Data: []byte(tt.template)},
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			_, err = kind.Render(widget(testv1alpha1.WidgetSpec{}))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestLoadRejectsBadTemplates(t *testing.T) {
	tests := map[string]fstest.MapFS{
		"no declaration": {"x.yaml": {Data: []byte("a: b")}},
		"parse error":    {"_kind.yaml": {Data: []byte("owns: [{apiVersion: v1, kind: ConfigMap}]")}, "x.yaml": {Data: []byte("{{ if }}")}},
		"unknown field":  {"_kind.yaml": {Data: []byte("own: []")}, "x.yaml": {Data: []byte("a: b")}},
		"no templates":   {"_kind.yaml": {Data: []byte("owns: [{apiVersion: v1, kind: ConfigMap}]")}},
		"impure call":    {"_kind.yaml": {Data: []byte("owns: [{apiVersion: v1, kind: ConfigMap}]")}, "x.yaml": {Data: []byte("{{ now }}")}},
		"bad namespace":  {"_kind.yaml": {Data: []byte("owns: [{apiVersion: v1, kind: ConfigMap}]\nnamespaces: [Kube_System]")}, "x.yaml": {Data: []byte("a: b")}},
	}
	for name, files := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := render.Load(render.Definition{GroupVersionKind: testv1alpha1.GroupVersion.WithKind("Widget"), Templates: files})
			if err == nil {
				t.Fatal("Load succeeded; want an error at start-up")
			}
		})
	}
}

// TestLoadRejectsAnOwnedTypeAtTwoVersions: one object is one object at any
// version, so a kind declares each owned group and kind once.
func TestLoadRejectsAnOwnedTypeAtTwoVersions(t *testing.T) {
	files := fstest.MapFS{
		"_kind.yaml": {Data: []byte("owns: [{apiVersion: autoscaling/v1, kind: HorizontalPodAutoscaler}, {apiVersion: autoscaling/v2, kind: HorizontalPodAutoscaler}]")},
		"x.yaml":     {Data: []byte("a: b")},
	}
	_, err := render.Load(render.Definition{GroupVersionKind: testv1alpha1.GroupVersion.WithKind("Widget"), Templates: files})
	if err == nil || !strings.Contains(err.Error(), "declares owned type HorizontalPodAutoscaler.autoscaling twice (versions v1 and v2)") {
		t.Fatalf("Load: %v; want the owned type declared twice", err)
	}
}

// TestRenderIsDeterministic renders the same input many times.
func TestRenderIsDeterministic(t *testing.T) {
	kind := mustLoad(t)
	first := ids(t, kind, widget(testv1alpha1.WidgetSpec{Message: "m", Replicas: 2, Service: true}))
	for range 20 {
		if got := ids(t, kind, widget(testv1alpha1.WidgetSpec{Message: "m", Replicas: 2, Service: true})); got != first {
			t.Fatalf("render changed between runs:\n%s\n%s", got, first)
		}
	}
}

// FuzzRenderShape feeds arbitrary strings into every string field of the
// spec, and valid names into the resource's name: the number, types and
// namespaces of the rendered objects must not change, their names only by
// the resource's, and the strings must arrive unchanged as values (no YAML
// injection, and no name YAML reads as a number, a boolean or null).
func FuzzRenderShape(f *testing.F) {
	f.Add("hello", "extra", "0.5", "demo")
	f.Add("a\n---\nkind: Secret\nmetadata:\n  name: x", "b: c\n- d", "1\"\n  limits: {}", "web")
	f.Add("{{ .Name }}", "'", `\u0000`, "x")
	f.Add("on", "null", "1e3", "123")
	f.Add("yes", "~", "0x1f", "on")
	f.Add("true", "false", "1", "null")
	kind := mustLoad(f)
	shape := func(objs []*unstructured.Unstructured) string {
		var b strings.Builder
		for _, o := range objs {
			b.WriteString(o.GroupVersionKind().String() + " " + o.GetNamespace() + "/" + o.GetName() + "\n")
		}
		return b.String()
	}
	base, err := kind.Render(widget(testv1alpha1.WidgetSpec{Message: "m", Extra: "e", CPU: "1", Replicas: 1, Service: true}))
	if err != nil {
		f.Fatal(err)
	}
	baseShape := shape(base)
	f.Fuzz(func(t *testing.T, message, extra, cpu, name string) {
		if extra == "" || cpu == "" {
			return // empty turns fields off by design
		}
		if !utf8.ValidString(message) || !utf8.ValidString(extra) || !utf8.ValidString(cpu) {
			return // the API server only stores valid UTF-8
		}
		if len(name) > 50 || len(validation.IsDNS1123Label(name)) > 0 {
			return // the API server takes no other name (and the ConfigMap adds -config)
		}
		cr := widget(testv1alpha1.WidgetSpec{Message: message, Extra: extra, CPU: cpu, Replicas: 1, Service: true})
		cr.Name = name
		objs, err := kind.Render(cr)
		if err != nil {
			t.Fatalf("render failed on name %q, strings %q %q %q: %v", name, message, extra, cpu, err)
		}
		if got, want := shape(objs), strings.ReplaceAll(baseShape, "/demo", "/"+name); got != want {
			t.Fatalf("shape changed:\n%s\nwant:\n%s", got, want)
		}
		cm := objs[0]
		if got, _, _ := unstructured.NestedString(cm.Object, "data", "message"); got != message {
			t.Fatalf("message arrived as %q, want %q", got, message)
		}
		if got, _, _ := unstructured.NestedString(cm.Object, "data", "extra"); got != extra {
			t.Fatalf("extra arrived as %q, want %q", got, extra)
		}
	})
}

func BenchmarkRender(b *testing.B) {
	kind := mustLoad(b)
	cr := widget(testv1alpha1.WidgetSpec{Message: "hello", Replicas: 3, Service: true, CPU: "0.5"})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := kind.Render(cr); err != nil {
			b.Fatal(err)
		}
	}
}

func mustLoad(tb testing.TB) *render.Kind {
	tb.Helper()
	kind, err := render.Load(testkind.Widget())
	if err != nil {
		tb.Fatal(err)
	}
	return kind
}

func ids(t *testing.T, kind *render.Kind, cr v1alpha1.Object) string {
	t.Helper()
	objs, err := kind.Render(cr)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, o := range objs {
		js, _ := o.MarshalJSON()
		b.Write(js)
	}
	return b.String()
}

// TestKustomization runs the rendered files through a kustomization.yaml in
// the kind's folder, itself a template.
func TestKustomization(t *testing.T) {
	kind, err := render.Load(render.Definition{
		GroupVersionKind: testv1alpha1.GroupVersion.WithKind("Widget"),
		New:              func() v1alpha1.Object { return &testv1alpha1.Widget{} },
		Templates: fstest.MapFS{
			"_kind.yaml":         {Data: []byte("owns:\n- {apiVersion: v1, kind: ConfigMap}\n")},
			"cm.yaml":            {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {message: {{ .Spec.Message | quote }}}\n")},
			"kustomization.yaml": {Data: []byte("resources: [cm.yaml]\nnamePrefix: {{ .Name }}-\nlabels:\n- pairs: {tier: web}\n")},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := kind.Render(widget(testv1alpha1.WidgetSpec{Message: "hi"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 || objs[0].GetName() != "demo-cm" || objs[0].GetLabels()["tier"] != "web" || objs[0].GetNamespace() != "team-a" {
		t.Fatalf("got %d objects, first %s/%s labels %v", len(objs), objs[0].GetNamespace(), objs[0].GetName(), objs[0].GetLabels())
	}
	if got, _, _ := unstructured.NestedString(objs[0].Object, "data", "message"); got != "hi" {
		t.Errorf("message = %q", got)
	}
}

// The templates' version changes with any edit of the kind's folder, its
// declaration included, and only then.
func TestTemplatesVersion(t *testing.T) {
	folder := func(template string) fstest.MapFS {
		return fstest.MapFS{
			"_kind.yaml": {Data: []byte("owns: [{apiVersion: v1, kind: ConfigMap}]")},
			"cm.yaml":    {Data: []byte(template)},
		}
	}
	version := func(files fstest.MapFS) string {
		t.Helper()
		kind, err := render.Load(render.Definition{GroupVersionKind: testv1alpha1.GroupVersion.WithKind("Widget"), Templates: files})
		if err != nil {
			t.Fatal(err)
		}
		return kind.Templates()
	}
	base := version(folder("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"))
	if !strings.HasPrefix(base, "sha256:") || len(base) != len("sha256:")+12 {
		t.Errorf("version %q, want sha256: and 12 hex digits", base)
	}
	if again := version(folder("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n")); again != base {
		t.Errorf("the same folder has versions %s and %s", base, again)
	}
	edited := version(folder("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n"))
	declared := folder("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n")
	declared["_kind.yaml"] = &fstest.MapFile{Data: []byte("owns: [{apiVersion: v1, kind: ConfigMap, status: true}]")}
	if edited == base || version(declared) == base {
		t.Error("an edited template or declaration keeps the version")
	}
}

// TestAListIsItsItems: a template that renders a list (kind: List, as
// alertmanager's chart does for a Service per replica) renders its items,
// each an object of its own, as kubectl and Helm apply it.
func TestAListIsItsItems(t *testing.T) {
	kind, err := render.Load(render.Definition{
		GroupVersionKind: testv1alpha1.GroupVersion.WithKind("Widget"),
		New:              func() v1alpha1.Object { return &testv1alpha1.Widget{} },
		Templates: fstest.MapFS{
			"_kind.yaml": {Data: []byte("owns:\n- {apiVersion: v1, kind: ConfigMap}\n")},
			"x.yaml":     {Data: []byte("apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}\n")},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := kind.Render(widget(testv1alpha1.WidgetSpec{}))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0].GetName() != "a" || objs[1].GetKind() != "ConfigMap" {
		t.Errorf("rendered %d objects, want the list's two ConfigMaps", len(objs))
	}
}
