package render_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
	"github.com/stencil-operator/stencil/render"
	"github.com/stencil-operator/stencil/render/kindtest"
)

const graphOwns = "owns:\n- {apiVersion: v1, kind: ConfigMap}\n- {apiVersion: v1, kind: Secret}\n- {apiVersion: batch/v1, kind: Job}\n"

func loadGraph(t *testing.T, kindYAML string, files map[string]string) (*render.Kind, error) {
	t.Helper()
	fsys := fstest.MapFS{"_kind.yaml": {Data: []byte(graphOwns + kindYAML)}}
	for name, src := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(src)}
	}
	return render.Load(render.Definition{
		GroupVersionKind: testv1alpha1.GroupVersion.WithKind("Widget"),
		New:              func() v1alpha1.Object { return &testv1alpha1.Widget{} },
		Templates:        fsys,
	})
}

func configMap(name, body string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + "}\n" + body
}

// TestGraphLoadErrors: a graph that cannot be ordered or that breaks a rule
// fails at load (start-up, stencil lint), naming the nodes.
func TestGraphLoadErrors(t *testing.T) {
	tests := []struct {
		name, kind string
		files      map[string]string
		want       string
	}{
		{"cycle through after", "graph:\n  a: {after: [b]}\n  b: {after: [c]}\n  c: {after: [a]}\n",
			map[string]string{"a.yaml": configMap("a", ""), "b.yaml": configMap("b", ""), "c.yaml": configMap("c", "")},
			"cycle: a → b → c → a"},
		{"cycle through a read", "graph:\n  a: {after: [b]}\n",
			map[string]string{"a.yaml": configMap("a", ""), "b.yaml": `{{ $a := object "a" }}` + configMap("b", "")},
			"cycle: a → b → a"},
		{"unknown node in after", "graph:\n  a: {after: [nope]}\n", map[string]string{"a.yaml": configMap("a", "")}, `after: no node "nope"`},
		{"node without template", "graph:\n  nope: {}\n", map[string]string{"a.yaml": configMap("a", "")}, `node "nope" has no template nope.yaml`},
		{"waits for itself", "graph:\n  a: {after: [a]}\n", map[string]string{"a.yaml": configMap("a", "")}, "waits for itself"},
		{"reads an unknown node", "graph: {}\ninputs: {}\n", map[string]string{"a.yaml": `{{ object "zz" }}`}, `object "zz": no such node`},
		{"name not literal", "graph:\n  a: {}\n", map[string]string{"a.yaml": `{{ object .Name }}`, "b.yaml": ""}, "object takes a literal name"},
		{"read through a helper", "graph:\n  a: {}\n", map[string]string{"_h.tpl": `{{ define "h" }}{{ object "zz" }}{{ end }}`, "a.yaml": `{{ include "h" . }}`}, `object "zz": no such node`},
		{"undeclared input", "graph:\n  a: {}\n", map[string]string{"a.yaml": `{{ input "cfg" }}`}, `input "cfg": not declared under inputs`},
		{"generate outside createOnly", "graph:\n  a: {}\n", map[string]string{"a.yaml": `{{ generate 8 }}`}, "generate is allowed only in a createOnly node"},
		{"input with name and selector", "inputs:\n  cfg: {apiVersion: v1, kind: ConfigMap, name: x, selector: y}\n", map[string]string{"a.yaml": ""}, "exactly one of name and selector"},
		{"bad readyWhen", "graph:\n  a: {readyWhen: ['{{ if }}']}\n", map[string]string{"a.yaml": ""}, "readyWhen[0]"},
		{"reads itself", "graph:\n  a: {}\n", map[string]string{"a.yaml": `{{ object "a" }}`}, "a node cannot read its own objects"},
		{"read in a chain", "graph:\n  a: {}\n", map[string]string{"a.yaml": `{{ (object "zz").data }}`}, `object "zz": no such node`},
		{"computed include", "graph:\n  a: {}\n", map[string]string{"_h.tpl": `{{ define "h" }}{{ end }}`, "a.yaml": `{{ include (print "h") . }}`, "b.yaml": `{{ $_ := object "a" }}`}, "include takes a literal template name"},
		{"fixed namespace, name from the spec", "inputs:\n  cfg: {apiVersion: v1, kind: ConfigMap, namespace: platform, name: '{{ .Spec.Message }}'}\n",
			map[string]string{"a.yaml": `{{ input "cfg" }}`}, "needs a fixed name or selector"},
		{"kustomize", "graph:\n  a: {}\n", map[string]string{"a.yaml": "", "kustomization.yaml": "resources: [a.yaml]\n"}, "cannot use kustomize"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadGraph(t, tt.kind, tt.files)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Load: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// live returns the objects as the cluster would hold them once applied and
// ready: with the desired hash, owned by the widget (uid-1).
func live(objs ...*unstructured.Unstructured) render.Objects {
	var out render.Objects
	for _, o := range objs {
		c := o.DeepCopy()
		if c.GetKind() == "Job" {
			_ = unstructured.SetNestedField(c.Object, int64(1), "status", "succeeded")
			_ = unstructured.SetNestedSlice(c.Object, []any{map[string]any{"type": "Complete", "status": "True"}}, "status", "conditions")
		}
		out = append(out, c)
	}
	return out
}

func names(objs []*unstructured.Unstructured) string {
	var s []string
	for _, o := range objs {
		s = append(s, o.GetKind()+"/"+o.GetName())
	}
	return strings.Join(s, " ")
}

func waits(p *render.Plan) string {
	var s []string
	for _, w := range p.Waiting {
		s = append(s, w.String())
	}
	return strings.Join(s, "; ")
}

// TestGraphStages renders a three-stage graph turn by turn, as the
// reconciler does: each turn's objects become live (and ready) before the
// next node renders, and a node reads its predecessor's live value.
func TestGraphStages(t *testing.T) {
	kind, err := loadGraph(t, "graph:\n  secret: {createOnly: true}\n  job: {after: [secret]}\n  app: {after: [job]}\n", map[string]string{
		"secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: pw}\ndata: {password: {{ generate 16 | b64enc | quote }}}\n",
		"job.yaml":    "apiVersion: batch/v1\nkind: Job\nmetadata: {name: migrate}\nspec: {template: {spec: {restartPolicy: Never, containers: [{name: m, image: m}]}}}\n",
		"app.yaml":    configMap("app", `data: {digest: {{ object "secret" | need "data.password" | sha256sum | trunc 8 | quote }}}`+"\n"),
	})
	if err != nil {
		t.Fatal(err)
	}
	cr := widget(testv1alpha1.WidgetSpec{})
	var snapshot render.Objects
	steps := []struct{ objects, waiting string }{
		{"Secret/pw", "job waits for secret: Secret pw to be created; app waits for job (which waits too)"},
		{"Secret/pw Job/migrate", "app waits for job: Job migrate to be created"},
		{"ConfigMap/app Secret/pw Job/migrate", ""},
	}
	for i, step := range steps {
		plan, err := kind.RenderGraph(cr, render.GraphInput{Live: snapshot})
		if err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
		if got := names(plan.Objects); got != step.objects {
			t.Errorf("turn %d: rendered %s, want %s", i, got, step.objects)
		}
		if got := waits(plan); got != step.waiting {
			t.Errorf("turn %d: waiting %q, want %q", i, got, step.waiting)
		}
		if i == 0 {
			// The Secret is live with the first render's value; later
			// renders generate others, which are never applied.
			snapshot = live(plan.Objects...)
			continue
		}
		snapshot = append(live(plan.Objects...)[:0:0], snapshot...)
		for _, o := range live(plan.Objects...) {
			if o.GetKind() != "Secret" {
				snapshot = append(snapshot, o)
			}
		}
	}
	if ann := snapshot[0].GetAnnotations(); ann[v1alpha1.AnnotationSSA] != v1alpha1.SSAIfNotPresent || ann[v1alpha1.AnnotationGraphStage] != "0" {
		t.Errorf("a createOnly node's object is created only, at stage 0: annotations %v", ann)
	}
}

// TestGraphWaits: a node that waits is not rendered, and never with an
// empty value.
func TestGraphWaits(t *testing.T) {
	cr := widget(testv1alpha1.WidgetSpec{})
	tests := []struct {
		name, kind string
		files      map[string]string
		live       string // YAML stream of live objects
		want       string // what the last node waits for; empty: it renders
	}{
		{"missing value", "graph:\n  a: {}\n",
			map[string]string{"a.yaml": configMap("a", ""), "b.yaml": configMap("b", `data: {v: {{ object "a" | need "data.value" | quote }}}`)},
			"", "b waits for a: ConfigMap a to be created"},
		{"empty value", "graph: {}\n",
			map[string]string{"a.yaml": configMap("a", ""), "b.yaml": configMap("b", `data: {v: {{ object "a" | need "data.value" | quote }}}`)},
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: team-a, labels: {stencil.dev/owner-uid: uid-1}, annotations: {stencil.dev/desired-hash: HASH}}\ndata: {value: \"\"}\n",
			"b waits for ConfigMap a to have data.value"},
		{"someone else's object", "graph: {}\n",
			map[string]string{"a.yaml": configMap("a", ""), "b.yaml": `{{ object "a" }}`},
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: team-a, labels: {stencil.dev/owner-uid: other}, annotations: {stencil.dev/desired-hash: HASH}}\n",
			"b waits for a: ConfigMap a, which is not this resource's"},
		{"not updated yet", "graph: {}\n",
			map[string]string{"a.yaml": configMap("a", ""), "b.yaml": `{{ object "a" }}`},
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: team-a, labels: {stencil.dev/owner-uid: uid-1}, annotations: {stencil.dev/desired-hash: old}}\n",
			"b waits for a: ConfigMap a to be updated"},
		{"readyWhen", "graph:\n  a: {readyWhen: ['{{ eq (dig \"data\" \"ready\" \"\" .) \"yes\" }}']}\n",
			map[string]string{"a.yaml": configMap("a", ""), "b.yaml": `{{ object "a" }}`},
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: team-a, labels: {stencil.dev/owner-uid: uid-1}, annotations: {stencil.dev/desired-hash: HASH}}\ndata: {ready: \"no\"}\n",
			`b waits for a: ConfigMap a: readyWhen[0] {{ eq (dig "data" "ready" "" .) "yes" }}`},
		{"readyWhen passes", "graph:\n  a: {readyWhen: ['{{ eq (dig \"data\" \"ready\" \"\" .) \"yes\" }}']}\n",
			map[string]string{"a.yaml": configMap("a", ""), "b.yaml": configMap("b", `data: {v: {{ object "a" | need "data.ready" | quote }}}`)},
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: team-a, labels: {stencil.dev/owner-uid: uid-1}, annotations: {stencil.dev/desired-hash: HASH}}\ndata: {ready: \"yes\"}\n",
			""},
		{"running Job", "graph: {}\n",
			map[string]string{"a.yaml": "apiVersion: batch/v1\nkind: Job\nmetadata: {name: a}\nspec: {template: {spec: {restartPolicy: Never, containers: [{name: m, image: m}]}}}\n", "b.yaml": `{{ object "a" }}`},
			"apiVersion: batch/v1\nkind: Job\nmetadata: {name: a, namespace: team-a, labels: {stencil.dev/owner-uid: uid-1}, annotations: {stencil.dev/desired-hash: HASH}}\nstatus: {startTime: \"2026-01-01T00:00:00Z\", active: 1}\n",
			"b waits for a: Job a to complete (Job in progress. success:0, active: 1, failed: 0)"},
		{"failed Job", "graph: {}\n",
			map[string]string{"a.yaml": "apiVersion: batch/v1\nkind: Job\nmetadata: {name: a}\nspec: {template: {spec: {restartPolicy: Never, containers: [{name: m, image: m}]}}}\n", "b.yaml": `{{ object "a" }}`},
			"apiVersion: batch/v1\nkind: Job\nmetadata: {name: a, namespace: team-a, labels: {stencil.dev/owner-uid: uid-1}, annotations: {stencil.dev/desired-hash: HASH}}\nstatus: {startTime: \"2026-01-01T00:00:00Z\", failed: 4, conditions: [{type: Failed, status: \"True\"}]}\n",
			"b waits for a: Job a, which failed (Job Failed. failed: 4/1)"},
		{"empty selector", "inputs:\n  cfg: {apiVersion: v1, kind: ConfigMap, selector: '{{ .Spec.Message }}'}\n",
			map[string]string{"b.yaml": configMap("b", `data: {n: {{ input "cfg" | len | quote }}}`)},
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: anyone, namespace: team-a}\n", "b waits for a selector for the input ConfigMap (the spec gives none)"},
		{"missing input", "inputs:\n  cfg: {apiVersion: v1, kind: ConfigMap, name: '{{ .Name }}-settings'}\n",
			map[string]string{"b.yaml": configMap("b", `data: {v: {{ input "cfg" | need "data.v" | quote }}}`)},
			"", "b waits for ConfigMap team-a/demo-settings to exist"},
		{"optional input", "inputs:\n  cfg: {apiVersion: v1, kind: ConfigMap, name: '{{ .Name }}-settings', optional: true}\n",
			map[string]string{"b.yaml": configMap("b", `data: {v: {{ input "cfg" | dig "data" "v" "none" | quote }}}`)},
			"", ""},
		{"input found", "inputs:\n  cfg: {apiVersion: v1, kind: ConfigMap, name: '{{ .Name }}-settings'}\n",
			map[string]string{"b.yaml": configMap("b", `data: {v: {{ input "cfg" | need "data.v" | quote }}}`)},
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: demo-settings, namespace: team-a}\ndata: {v: x}\n", ""},
		{"input in another namespace is not read", "inputs:\n  cfg: {apiVersion: v1, kind: ConfigMap, name: '{{ .Name }}-settings'}\n",
			map[string]string{"b.yaml": configMap("b", `data: {v: {{ input "cfg" | need "data.v" | quote }}}`)},
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: demo-settings, namespace: team-b}\ndata: {v: x}\n", "b waits for ConfigMap team-a/demo-settings to exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kind, err := loadGraph(t, tt.kind, tt.files)
			if err != nil {
				t.Fatal(err)
			}
			snapshot, err := render.DecodeObjects([]byte(tt.live))
			if err != nil {
				t.Fatal(err)
			}
			if first, err := kind.Render(cr); err == nil && len(first) > 0 {
				for _, o := range snapshot { // HASH: what a's render holds
					if ann := o.GetAnnotations(); ann[v1alpha1.AnnotationDesiredHash] == "HASH" {
						ann[v1alpha1.AnnotationDesiredHash] = first[0].GetAnnotations()[v1alpha1.AnnotationDesiredHash]
						o.SetAnnotations(ann)
					}
				}
			}
			plan, err := kind.RenderGraph(cr, render.GraphInput{Live: snapshot})
			if err != nil {
				t.Fatal(err)
			}
			got := waits(plan)
			if got != tt.want {
				t.Fatalf("waiting: %q, want %q", got, tt.want)
			}
			if failed := len(plan.Waiting) > 0 && plan.Waiting[0].Failed; failed != strings.Contains(tt.name, "failed") {
				t.Fatalf("Failed = %v: only a node that waits for a failed object is", failed)
			}
			for _, o := range plan.Objects {
				if o.GetName() == "b" && tt.want != "" {
					t.Fatalf("b rendered while it waits: %v", o.Object)
				}
			}
		})
	}
}

// TestSecretInputOnlyIntoSecrets: a resource's author who names a Secret
// as an input cannot have a template copy its data into an object more
// people may read.
func TestSecretInputOnlyIntoSecrets(t *testing.T) {
	decl := "inputs:\n  creds: {apiVersion: v1, kind: Secret, name: '{{ .Spec.Message }}'}\n"
	snapshot := render.Objects{{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "team-b-token", "namespace": "team-a"}, "data": map[string]any{"token": "c2VjcmV0"}}}}
	cr := widget(testv1alpha1.WidgetSpec{Message: "team-b-token"})

	leak, err := loadGraph(t, decl, map[string]string{"copy.yaml": configMap("copy", `data: {token: {{ input "creds" | need "data.token" | quote }}}`)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = leak.RenderGraph(cr, render.GraphInput{Live: snapshot})
	if err == nil || !strings.Contains(err.Error(), `reads the Secret input "creds", so it may render only Secrets`) || strings.Contains(err.Error(), "team-b-token") {
		t.Fatalf("a Secret's data rendered into a ConfigMap: %v", err)
	}
	if strings.Contains(err.Error(), "c2VjcmV0") {
		t.Fatalf("the error shows the Secret's data: %v", err)
	}

	// Nor through a node that copied it into a Secret first, however the
	// template reads it.
	for _, read := range []string{`{{ object "copy" | need "data.token" | quote }}`, `{{ (object "copy").data.token | quote }}`} {
		t.Run(read, func(t *testing.T) { laundering(t, decl, snapshot, cr, read) })
	}

	kept, err := loadGraph(t, decl, map[string]string{"copy.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: copy}\ndata: {token: {{ input \"creds\" | need \"data.token\" | quote }}}\n"})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := kept.RenderGraph(cr, render.GraphInput{Live: snapshot})
	if err != nil || len(plan.Objects) != 1 {
		t.Fatalf("a Secret input into a Secret: %v, %d objects", err, len(plan.Objects))
	}

	// Nor does a name made from it, when the name is refused.
	named, err := loadGraph(t, decl, map[string]string{"copy.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: '{{ input \"creds\" | need \"data.token\" | b64dec }}-X'}\n"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err = named.RenderGraph(cr, render.GraphInput{Live: snapshot}); err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("the error of a name made from a Secret's data: %v", err)
	}

	// A template's error after it read the data does not quote it.
	quoting, err := loadGraph(t, decl, map[string]string{"copy.yaml": `{{ input "creds" | need "data.token" | b64dec | fail }}`})
	if err != nil {
		t.Fatal(err)
	}
	_, err = quoting.RenderGraph(cr, render.GraphInput{Live: snapshot})
	if err == nil || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "its message is withheld") {
		t.Fatalf("the error of a template that read a Secret: %v", err)
	}
}

func laundering(t *testing.T, decl string, snapshot render.Objects, cr *testv1alpha1.Widget, read string) {
	t.Helper()
	laundered, err := loadGraph(t, decl, map[string]string{
		"copy.yaml":  "apiVersion: v1\nkind: Secret\nmetadata: {name: copy}\ndata: {token: {{ input \"creds\" | need \"data.token\" | quote }}}\n",
		"again.yaml": configMap("again", `data: {token: `+read+`}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	live := render.Objects{snapshot[0], {Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "copy", "namespace": "team-a", "labels": map[string]any{v1alpha1.LabelOwnerUID: "uid-1"}}, "data": map[string]any{"token": "c2VjcmV0"}}}}
	if first, err := laundered.RenderGraph(cr, render.GraphInput{Live: snapshot}); err == nil && len(first.Objects) == 1 {
		ann := live[1].GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[v1alpha1.AnnotationDesiredHash] = first.Objects[0].GetAnnotations()[v1alpha1.AnnotationDesiredHash]
		live[1].SetAnnotations(ann)
	} else {
		t.Fatalf("the copy: %v", err)
	}
	_, err = laundered.RenderGraph(cr, render.GraphInput{Live: live})
	if err == nil || !strings.Contains(err.Error(), `reads node "copy", which holds the Secret input "creds", so it may render only Secrets`) {
		t.Fatalf("a Secret input's data reached a ConfigMap through another node: %v", err)
	}
}

// TestOnceNodes: a node declared once is done when its objects are seen
// live and ready (a Job complete), and status records it; then an object
// of it that is gone is left out (Plan.Done), not made again, and the
// nodes after it go on. One that failed, or went before it was seen
// ready, is made again; so is one whose template renders it differently.
// A Job's ttlSecondsAfterFinished under 15s is raised to 15s, for stencil
// to see how it ended.
func TestOnceNodes(t *testing.T) {
	kind, err := loadGraph(t, "graph:\n  hook: {once: true}\n  app: {after: [hook]}\n", map[string]string{
		"hook.yaml": "apiVersion: batch/v1\nkind: Job\nmetadata: {name: migrate}\n" +
			"spec: {ttlSecondsAfterFinished: 0, template: {spec: {restartPolicy: Never, containers: [{name: m, image: '{{ .Spec.Message }}'}]}}}\n",
		"app.yaml": configMap("app", ""),
	})
	if err != nil {
		t.Fatal(err)
	}
	cr := widget(testv1alpha1.WidgetSpec{Message: "v1"})
	first, err := kind.RenderGraph(cr, render.GraphInput{})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(first.Objects); got != "Job/migrate" || len(first.Once) != 0 || len(first.Done) != 0 {
		t.Fatalf("before it ran: objects %s, once %v, done %v; want the Job, not done", got, first.Once, first.Done)
	}
	if ttl, _, _ := unstructured.NestedInt64(first.Objects[0].Object, "spec", "ttlSecondsAfterFinished"); ttl != 15 {
		t.Errorf("ttlSecondsAfterFinished %d, want 15", ttl)
	}
	complete := kindtest.Healthy(first.Objects[0].DeepCopy())
	failed := first.Objects[0].DeepCopy()
	failed.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Failed", "status": "True"}}}
	seen, err := kind.RenderGraph(cr, render.GraphInput{Live: render.Objects{complete}})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen.Once) != 1 || seen.Once[0].Node != "hook" {
		t.Fatalf("the Job seen complete: once %v, want the hook done", seen.Once)
	}
	for _, tt := range []struct {
		name     string
		recorded bool
		message  string
		live     render.Objects
		objects  string
		done     int
		once     bool
	}{
		{"done and still there", true, "v1", render.Objects{complete}, "ConfigMap/app Job/migrate", 0, true},
		{"done and gone (its TTL)", true, "v1", nil, "ConfigMap/app", 1, true},
		{"done, gone, and rendered differently", true, "v2", nil, "Job/migrate", 0, false},
		{"failed", false, "v1", render.Objects{failed}, "Job/migrate", 0, false},
		{"gone before it was seen done", false, "v1", nil, "Job/migrate", 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cr := cr.DeepCopy()
			cr.Spec.Message = tt.message
			if tt.recorded {
				cr.Status.Once = seen.Once
			}
			plan, err := kind.RenderGraph(cr, render.GraphInput{Live: tt.live})
			if err != nil {
				t.Fatal(err)
			}
			if got := names(plan.Objects); got != tt.objects || len(plan.Done) != tt.done || (len(plan.Once) == 1) != tt.once {
				t.Errorf("objects %s, %d done, once %v (waiting %q); want %s, %d done, once %v", got, len(plan.Done), plan.Once, waits(plan), tt.objects, tt.done, tt.once)
			}
		})
	}
}
