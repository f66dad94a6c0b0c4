package render_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	operatorv1 "github.com/stencil-operator/stencil/api/operator/v1"
	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/render"
)

// TestLimits: for each limit, a hostile spec (a huge count in
// spec.pageContentHtml, which these templates feed to a loop or a count
// function) fails the render with a *LimitError naming that limit, quickly;
// the same templates render an ordinary spec.
func TestLimits(t *testing.T) {
	const head = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ .Name | quote }}}\n"
	tests := []struct {
		name, template, limit string
		status                bool
		hostile               string // the count; default 10^12
	}{
		{"a range over until", head + "data:\n{{- range $i := until (atoi .Spec.PageContentHtml) }}\n  k{{ $i }}: v{{ end }}\n", "rendered bytes", false, ""},
		{"until itself", head + "{{- $x := until (atoi .Spec.PageContentHtml) }}\n", "rendered bytes", false, ""},
		{"repeat", head + "data: {k: {{ repeat (atoi .Spec.PageContentHtml) \"xxxxxxxx\" | quote }}}\n", "rendered bytes", false, ""},
		{"indent", head + "data: {k: {{ indent (atoi .Spec.PageContentHtml) \"x\" | quote }}}\n", "rendered bytes", false, ""},
		{"include in a loop", "{{ define \"big\" }}{{ repeat 1000 \"x\" }}{{ end }}" + head + "data:\n{{- range $i := until (atoi .Spec.PageContentHtml) }}\n  k{{ $i }}: {{ include \"big\" . | quote }}{{ end }}\n", "rendered bytes", false, ""},
		{"objects", "{{- range $i := until (atoi .Spec.PageContentHtml) }}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: \"c{{ $i }}\"}\n{{- end }}\n", "rendered objects", false, "51"},
		{"a loop over an integer", head + "{{- range $i := atoi .Spec.PageContentHtml }}{{ end }}\n", "render steps", false, ""},
		{"status", head, "status bytes", true, ""},
		{"recursive include", "{{ define \"down\" }}{{ if gt . 0 }}-{{ include \"down\" (sub . 1) }}{{ end }}{{ end }}" + head + "data: {k: {{ include \"down\" (atoi .Spec.PageContentHtml) | quote }}}\n", "include depth", false, ""},
		{"replace that grows", head + "data: {k: {{ replace \"x\" (repeat 200 \"y\") (repeat (atoi .Spec.PageContentHtml) \"x\") | quote }}}\n", "rendered bytes", false, "100000"},
		{"print doubling", head + "{{- $s := \"xxxxxxxxxxxxxxxx\" }}{{ range $i := atoi .Spec.PageContentHtml }}{{ $s = print $s $s }}{{ end }}\n", "rendered bytes", false, "40"},
		{"quote doubling", head + "{{- $s := \"xxxxxxxxxxxxxxxx\" }}{{ range $i := atoi .Spec.PageContentHtml }}{{ $s = quote $s $s }}{{ end }}\n", "rendered bytes", false, "40"},
		{"printf width", head + "data: {k: {{ printf \"%*d\" (atoi .Spec.PageContentHtml) 1 | quote }}}\n", "rendered bytes", false, ""},
		{"regexReplaceAll that grows", head + "data: {k: {{ regexReplaceAll \"x\" (repeat (atoi .Spec.PageContentHtml) \"x\") \"$0$0$0$0$0$0$0$0\" | quote }}}\n", "rendered bytes", false, "200000"},
		{"many tiny objects", "{{- range $i := atoi .Spec.PageContentHtml }}\n---\n{apiVersion: v1, kind: ConfigMap, metadata: {name: \"c{{ $i }}\"}}\n{{- end }}\n", "rendered objects", false, "1000"},
		// Functions that build lists and dicts are charged what they make.
		{"concat doubling", head + "{{- $l := list 1 }}{{ range $i := atoi .Spec.PageContentHtml }}{{ $l = concat $l $l }}{{ end }}\n", "rendered bytes", false, "20"},
		{"append in a loop", head + "{{- $l := list }}{{ range $i := atoi .Spec.PageContentHtml }}{{ $l = append $l $i }}{{ end }}\n", "rendered bytes", false, "2000"},
		{"deepCopy of a shared list", head + "{{- $l := list 1 }}{{ range $i := atoi .Spec.PageContentHtml }}{{ $l = list $l $l }}{{ end }}{{ $c := deepCopy $l }}\n", "rendered bytes", false, "17"},
		{"splitList of every character", head + "{{- $l := splitList \"\" (repeat (atoi .Spec.PageContentHtml) \"x\") }}\n", "rendered bytes", false, "200000"},
		{"tpl whose source defines a loop", head + "{{- $_ := tpl (printf `{{ define \"x\" }}{{ range $i := %s }}{{ end }}{{ end }}{{ template \"x\" }}` .Spec.PageContentHtml) . }}\n", "render steps", false, ""},
		{"fromJson of a long array", head + "{{- $l := fromJson (printf \"[%s0]\" (repeat (atoi .Spec.PageContentHtml) \"0,\")) }}\n", "rendered bytes", false, "140000"},
	}
	limits := render.Limits{Steps: 200_000, Time: 10 * time.Second, Bytes: 1 << 20, Objects: 50, StatusBytes: 4 << 10}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := fstest.MapFS{
				"_kind.yaml":     {Data: []byte("owns: [{apiVersion: v1, kind: ConfigMap}]")},
				"configmap.yaml": {Data: []byte(tt.template)},
			}
			if tt.status {
				files["_status.yaml"] = &fstest.MapFile{Data: []byte("page: {{ repeat (atoi .Object.Spec.PageContentHtml) \"x\" | quote }}\n")}
			}
			k, err := render.Load(render.Definition{
				GroupVersionKind: operatorv1.GroupVersion.WithKind("MyWeb"),
				New:              func() v1alpha1.Object { return &operatorv1.MyWeb{} },
				Templates:        files,
			})
			if err != nil {
				t.Fatal(err)
			}
			k = k.WithLimits(limits)
			run := func(count string) error {
				web := &operatorv1.MyWeb{}
				web.Name, web.Namespace, web.Spec.PageContentHtml = "web", "default", count
				if tt.status {
					_, err := k.RenderStatus(web, render.LiveState{})
					return err
				}
				_, err := k.Render(web)
				return err
			}
			if err := run("3"); err != nil {
				t.Fatalf("an ordinary spec: %v", err)
			}
			start := time.Now()
			hostile := tt.hostile
			if hostile == "" {
				hostile = "1000000000000"
			}
			err = run(hostile)
			var limit *render.LimitError
			if !errors.As(err, &limit) || limit.Limit != tt.limit {
				t.Fatalf("error %v, want a LimitError on %s", err, tt.limit)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("the hostile render took %s", took)
			}
			if !strings.Contains(err.Error(), "exceeded its limit on "+tt.limit) {
				t.Errorf("message %q does not name the limit", err)
			}
		})
	}
}

// TestRenderStepsNotTime: the limit that stops a hostile loop counts the
// templates' steps, so the same render stops at the same step whatever
// the machine's load; the wall-clock limit is a backstop, which still
// stops a render that steps allow when it is set below what they take.
func TestRenderStepsNotTime(t *testing.T) {
	k, err := render.Load(render.Definition{
		GroupVersionKind: operatorv1.GroupVersion.WithKind("MyWeb"),
		New:              func() v1alpha1.Object { return &operatorv1.MyWeb{} },
		Templates: fstest.MapFS{
			"_kind.yaml":     {Data: []byte("owns: [{apiVersion: v1, kind: ConfigMap}]")},
			"configmap.yaml": {Data: []byte("{{- range $i := atoi .Spec.PageContentHtml }}{{ end }}\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	web := &operatorv1.MyWeb{}
	web.Name, web.Namespace = "web", "default"
	for _, tt := range []struct {
		name   string
		limits render.Limits
		count  string
		want   string // the limit; "" none
	}{
		{"under the steps", render.Limits{Steps: 1000, Time: time.Hour, Bytes: 1 << 20, Objects: 5, StatusBytes: 1}, "400", ""},
		{"over the steps", render.Limits{Steps: 1000, Time: time.Hour, Bytes: 1 << 20, Objects: 5, StatusBytes: 1}, "1000", "render steps"},
		{"over the time", render.Limits{Steps: math.MaxInt, Time: 50 * time.Millisecond, Bytes: 1 << 20, Objects: 5, StatusBytes: 1}, "1000000000000", "render time"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			web.Spec.PageContentHtml = tt.count
			_, err := k.WithLimits(tt.limits).Render(web)
			var limit *render.LimitError
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("render: %v", err)
			case tt.want != "" && (!errors.As(err, &limit) || limit.Limit != tt.want):
				t.Errorf("render: %v, want a LimitError on %s", err, tt.want)
			}
		})
	}
}
