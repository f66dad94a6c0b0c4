package render_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
	"github.com/stencil-operator/stencil/render"
)

// TestGraphTemplatesWithinLimits: the templates of _kind.yaml (a node's
// readyWhen rules, an input's name or selector) run within the render's
// limits, as the kind's files do. Each row's templates take a count from
// the spec (spec.replicas; a readyWhen rule reads it from the live object
// of node a): an ordinary count renders both nodes, a hostile one fails
// the render, quickly, with a *LimitError on the row's limit.
func TestGraphTemplatesWithinLimits(t *testing.T) {
	// down includes itself as many times as its argument says.
	const down = `{{ define "down" }}{{ if gt (int .) 0 }}{{ include "down" (sub . 1) }}{{ end }}{{ end }}`
	a := configMap("a", `data: {count: "{{ .Spec.Replicas }}"}`)
	b := `{{ $a := object "a" }}` + configMap("b", "")
	secretA := "apiVersion: v1\nkind: Secret\nmetadata: {name: a}\ndata: {count: \"{{ .Spec.Replicas | toString | b64enc }}\"}\n"
	readsInput := configMap("b", `data: {v: {{ input "cfg" | len | quote }}}`)
	tests := []struct {
		name    string
		kind    string            // _kind.yaml, after the owned types
		files   map[string]string // the kind's templates
		hostile int32             // the spec's count that goes over the limit
		limit   string            // the limit it goes over
		secret  bool              // the rule reads a Secret: its message is withheld
	}{
		{
			name:    "readyWhen recursing through include",
			kind:    "graph:\n  a: {readyWhen: ['{{ include \"down\" (atoi .data.count) }}true']}\n",
			files:   map[string]string{"_h.tpl": down, "a.yaml": a, "b.yaml": b},
			hostile: 1000,
			limit:   "include depth",
		},
		{
			name:    "readyWhen doubling a list",
			kind:    "graph:\n  a: {readyWhen: ['{{ $l := list 1 }}{{ range $i := atoi .data.count }}{{ $l = concat $l $l }}{{ end }}true']}\n",
			files:   map[string]string{"a.yaml": a, "b.yaml": b},
			hostile: 20,
			limit:   "rendered bytes",
		},
		{
			name:    "readyWhen allocating by a count",
			kind:    "graph:\n  a: {readyWhen: ['{{ $l := until (int (mul (atoi .data.count) 1000)) }}true']}\n",
			files:   map[string]string{"a.yaml": a, "b.yaml": b},
			hostile: 1000,
			limit:   "rendered bytes",
		},
		{
			name:    "readyWhen looping",
			kind:    "graph:\n  a: {readyWhen: ['{{ range $i := mul (atoi .data.count) 1000 }}{{ end }}true']}\n",
			files:   map[string]string{"a.yaml": a, "b.yaml": b},
			hostile: 100000,
			limit:   "render steps",
		},
		{
			name:    "readyWhen on a Secret recursing through include",
			kind:    "graph:\n  a: {readyWhen: ['{{ include \"down\" (atoi (b64dec .data.count)) }}true']}\n",
			files:   map[string]string{"_h.tpl": down, "a.yaml": secretA, "b.yaml": b},
			hostile: 1000,
			limit:   "include depth",
			secret:  true,
		},
		{
			name:    "input name recursing through include",
			kind:    "inputs:\n  cfg: {apiVersion: v1, kind: ConfigMap, name: '{{ include \"down\" .Spec.Replicas }}settings', optional: true}\n",
			files:   map[string]string{"_h.tpl": down, "b.yaml": readsInput},
			hostile: 1000,
			limit:   "include depth",
		},
		{
			name:    "input selector doubling a list",
			kind:    "inputs:\n  cfg: {apiVersion: v1, kind: ConfigMap, selector: '{{ $l := list 1 }}{{ range $i := int .Spec.Replicas }}{{ $l = concat $l $l }}{{ end }}app=x'}\n",
			files:   map[string]string{"b.yaml": readsInput},
			hostile: 20,
			limit:   "rendered bytes",
		},
		{
			name:    "input name looping",
			kind:    "inputs:\n  cfg: {apiVersion: v1, kind: ConfigMap, name: '{{ range $i := mul .Spec.Replicas 1000 }}{{ end }}settings', optional: true}\n",
			files:   map[string]string{"b.yaml": readsInput},
			hostile: 100000,
			limit:   "render steps",
		},
	}
	limits := render.Limits{Steps: 200_000, Time: 10 * time.Second, Bytes: 1 << 20, Objects: 50, StatusBytes: 4 << 10}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kind, err := loadGraph(t, tt.kind, tt.files)
			if err != nil {
				t.Fatal(err)
			}
			kind = kind.WithLimits(limits)
			if plan, err := renderTwice(kind, 3); err != nil || len(plan.Waiting) > 0 {
				t.Fatalf("an ordinary spec: %v, waiting: %v", err, plan)
			}
			start := time.Now()
			_, err = renderTwice(kind, tt.hostile)
			if limit, ok := errors.AsType[*render.LimitError](err); !ok || limit.Limit != tt.limit {
				t.Fatalf("error %v, want a LimitError on %s", err, tt.limit)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("the hostile render took %s", took)
			}
			if withheld := strings.Contains(err.Error(), "withheld"); withheld != tt.secret {
				t.Errorf("message %q: withheld is %v, want %v", err, withheld, tt.secret)
			}
		})
	}
}

// renderTwice renders a Widget of replicas twice, as the reconciler does
// after it applied the first render's objects: the second time with them
// live.
func renderTwice(kind *render.Kind, replicas int32) (*render.Plan, error) {
	cr := widget(testv1alpha1.WidgetSpec{Replicas: replicas})
	first, err := kind.RenderGraph(cr, render.GraphInput{})
	if err != nil {
		return nil, err
	}
	return kind.RenderGraph(cr, render.GraphInput{Live: render.Objects(first.Objects)})
}

// TestRuleMayNotDefine: a readyWhen rule or an input's template runs in the
// kind's template set, so it may not define a template there.
func TestRuleMayNotDefine(t *testing.T) {
	tests := []struct {
		name, kind string
	}{
		{"readyWhen", "graph:\n  a: {readyWhen: ['{{ define \"h\" }}x{{ end }}true']}\n"},
		{"input name", "inputs:\n  cfg: {apiVersion: v1, kind: ConfigMap, name: '{{ define \"h\" }}x{{ end }}cfg'}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadGraph(t, tt.kind, map[string]string{"_h.tpl": `{{ define "h" }}y{{ end }}`, "a.yaml": configMap("a", "")})
			if err == nil || !strings.Contains(err.Error(), `it defines the template "h"`) {
				t.Fatalf("error %v, want one that says the rule defines h", err)
			}
		})
	}
}
