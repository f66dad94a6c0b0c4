package render_test

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
	"github.com/stencil-operator/stencil/render"
)

// loadDeclared loads a Widget kind whose whole _kind.yaml is decl.
func loadDeclared(t *testing.T, decl string, files map[string]string) (*render.Kind, error) {
	t.Helper()
	fsys := fstest.MapFS{"_kind.yaml": {Data: []byte(decl)}}
	for name, src := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(src)}
	}
	return render.Load(render.Definition{
		GroupVersionKind: testv1alpha1.GroupVersion.WithKind("Widget"),
		New:              func() v1alpha1.Object { return &testv1alpha1.Widget{} },
		Templates:        fsys,
	})
}

// TestSecretInputKeepsSecretsFromStatus: a kind that reads a Secret input
// cannot declare a way for its status template or health to read its own
// Secrets, which may hold the input's data.
func TestSecretInputKeepsSecretsFromStatus(t *testing.T) {
	const creds = "inputs:\n  creds: {apiVersion: v1, kind: Secret, name: '{{ .Spec.Message }}'}\n"
	files := map[string]string{
		"copy.yaml":    "apiVersion: v1\nkind: Secret\nmetadata: {name: copy}\ndata: {token: {{ input \"creds\" | need \"data.token\" | quote }}}\n",
		"_status.yaml": "{{ with .Owned }}{}{{ end }}",
	}
	tests := []struct {
		name string
		// decl is the kind's _kind.yaml.
		decl string
		// want is in Load's error ("" when the kind loads).
		want string
	}{
		{name: "Secrets status: true",
			decl: "owns: [{apiVersion: v1, kind: Secret, status: true}]\n" + creds,
			want: "declares Secrets status: true"},
		{name: "Secrets health: true",
			decl: "owns: [{apiVersion: v1, kind: Secret, health: true}]\n" + creds,
			want: "declares Secrets health: true"},
		{name: "Secrets observed",
			decl: "owns: [{apiVersion: v1, kind: Secret}]\nobserves: [{apiVersion: v1, kind: Secret}]\n" + creds,
			want: "observes Secrets"},
		{name: "Secrets neither read by status nor judged",
			decl: "owns: [{apiVersion: v1, kind: Secret, health: false}]\nobserves: [{apiVersion: v1, kind: ConfigMap}]\n" + creds},
		{name: "no Secret input: Secrets may be observed and judged",
			decl: "owns: [{apiVersion: v1, kind: Secret, health: true, status: true}]\nobserves: [{apiVersion: v1, kind: Secret}]\ninputs:\n  creds: {apiVersion: v1, kind: ConfigMap, name: x}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadDeclared(t, tt.decl, files)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Load: %v, want none", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Load: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestSecretReadWithheld: once a template has read a Secret input's data,
// nothing it says reaches status: not its error, not what it waits for (a
// path given to need may be made from the data), not a limit's error (which
// keeps its type, for its reason). What it says before, or of the input's
// absence, stays.
func TestSecretReadWithheld(t *testing.T) {
	const decl = "inputs:\n  creds: {apiVersion: v1, kind: Secret, name: '{{ .Spec.Message }}'}\n"
	const value = "hunter2" // the Secret's token, aHVudGVyMg== in base64
	creds := render.Objects{{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "creds", "namespace": "team-a"}, "data": map[string]any{"token": "aHVudGVyMg=="}}}}
	const secret = "apiVersion: v1\nkind: Secret\nmetadata: {name: copy}\n"
	tests := []struct {
		name string
		// template is copy.yaml.
		template string
		// limits, when set, are the render's.
		limits *render.Limits
		// snapshot holds the input (nil: it does not exist).
		snapshot render.Objects
		// wantErr is in the error; wantWait in what copy waits for ("":
		// none).
		wantErr, wantWait string
		// limit: the error is a *render.LimitError.
		limit bool
	}{
		{name: "a need built from the data",
			template: `{{ $k := input "creds" | need "data.token" | b64dec }}{{ need (printf "data.%s" $k) (input "creds") }}`,
			snapshot: creds, wantWait: "a value its template needs after it read the Secret input \"creds\" (withheld"},
		{name: "a limit after the read",
			template: secret + `data: {token: {{ input "creds" | need "data.token" | b64dec | repeat 100 | b64enc | quote }}}`,
			limits:   &render.Limits{Steps: render.DefaultLimits.Steps, Time: render.DefaultLimits.Time, Bytes: 400, Objects: 10, StatusBytes: 100},
			snapshot: creds, wantErr: "copy.yaml: the template failed after it read the Secret input \"creds\"; its message is withheld", limit: true},
		{name: "a template's error after the read",
			template: `{{ input "creds" | need "data.token" | b64dec | printf "bad token %s" | fail }}`,
			snapshot: creds, wantErr: "its message is withheld"},
		{name: "an error before the read is shown",
			template: `{{ required "spec.extra is required" .Spec.Extra }}{{ input "creds" }}`,
			snapshot: creds, wantErr: "spec.extra is required"},
		{name: "a missing input is waited for by name",
			template: secret + `data: {token: {{ input "creds" | need "data.token" | quote }}}`,
			wantWait: "Secret team-a/creds to exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kind, err := loadDeclared(t, "owns: [{apiVersion: v1, kind: Secret}]\n"+decl, map[string]string{"copy.yaml": tt.template})
			if err != nil {
				t.Fatal(err)
			}
			if tt.limits != nil {
				kind = kind.WithLimits(*tt.limits)
			}
			plan, err := kind.RenderGraph(widget(testv1alpha1.WidgetSpec{Message: "creds"}), render.GraphInput{Live: tt.snapshot})
			said := waitsOrError(plan, err)
			if strings.Contains(said, value) || strings.Contains(said, "aHVudGVyMg") {
				t.Fatalf("the render quotes the Secret's data: %s", said)
			}
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("error: %v, want one containing %q", err, tt.wantErr)
			}
			if tt.wantWait != "" && (plan == nil || !strings.Contains(waits(plan), "copy waits for "+tt.wantWait)) {
				t.Fatalf("waiting: %q, want copy waiting for %q", said, tt.wantWait)
			}
			if _, ok := errors.AsType[*render.LimitError](err); ok != tt.limit {
				t.Fatalf("error %v: a *render.LimitError is %v, want %v (its reason, LimitExceeded, depends on it)", err, ok, tt.limit)
			}
		})
	}
}

// waitsOrError is what a render says: its error, else what its nodes wait
// for.
func waitsOrError(plan *render.Plan, err error) string {
	if err != nil {
		return err.Error()
	}
	return waits(plan)
}

// TestStatusTemplateReadsNoInput: the status template cannot read an input
// (nor a node's objects): the graph functions work only in a node's
// template.
func TestStatusTemplateReadsNoInput(t *testing.T) {
	for _, call := range []string{`input "creds"`, `object "copy"`} {
		t.Run(call, func(t *testing.T) {
			kind, err := loadDeclared(t, "owns: [{apiVersion: v1, kind: Secret}]\ninputs:\n  creds: {apiVersion: v1, kind: Secret, name: '{{ .Spec.Message }}'}\n", map[string]string{
				"copy.yaml":    "apiVersion: v1\nkind: Secret\nmetadata: {name: copy}\ndata: {token: {{ input \"creds\" | need \"data.token\" | quote }}}\n",
				"_status.yaml": "leak: {{ " + call + " | toJson | quote }}\n",
			})
			if err != nil {
				t.Fatal(err)
			}
			_, err = kind.RenderStatus(widget(testv1alpha1.WidgetSpec{Message: "creds"}), render.LiveState{})
			if err == nil || !strings.Contains(err.Error(), "only a graph kind's templates may call it") {
				t.Fatalf("a status template that reads the input: %v", err)
			}
		})
	}
}

// TestOwnSecretReadWithheld: the graph's own Secrets hold Secret data too (a
// generated password, or one a person chose in a Secret the node adopted),
// so once a template has read one through object or objects, nothing it
// says reaches status: not its error, not what it waits for, not a limit's
// error, not a name's refusal. Unlike a Secret input's data, it may reach
// other objects than Secrets (a Deployment refers to its password Secret).
// What a template says before the read, or after it read a node that
// renders no Secret, stays.
func TestOwnSecretReadWithheld(t *testing.T) {
	const decl = "owns: [{apiVersion: v1, kind: Secret}, {apiVersion: v1, kind: ConfigMap}]\n" +
		"graph:\n  pw: {createOnly: true}\n  plain: {createOnly: true}\n"
	const value = "hunter2" // the password, aHVudGVyMg== in base64
	owned := map[string]any{v1alpha1.LabelOwnerUID: "uid-1"}
	snapshot := render.Objects{
		{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "data": map[string]any{"password": "aHVudGVyMg=="},
			"metadata": map[string]any{"name": "pw", "namespace": "team-a", "resourceVersion": "42", "labels": owned}}},
		{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"password": value},
			"metadata": map[string]any{"name": "plain", "namespace": "team-a", "labels": owned}}},
	}
	const password = `object "pw" | need "data.password" | b64dec`
	tests := []struct {
		name string
		// template is conn.yaml.
		template string
		// limits, when set, are the render's.
		limits *render.Limits
		// wantErr is in the error; wantWait in what conn waits for ("":
		// none).
		wantErr, wantWait string
		// withheld: what the render says of conn is withheld, so it
		// must not quote the password.
		withheld bool
		// limit: the error is a *render.LimitError.
		limit bool
	}{
		{name: "a template's error after the read (the review's case)",
			template: `{{ ` + password + ` | mustToDate "2006-01-02" }}`,
			wantErr:  `conn.yaml: the template failed after it read a Secret of node "pw"; its message is withheld`, withheld: true},
		{name: "a need built from the data",
			template: `{{ $k := ` + password + ` }}{{ need (printf "data.%s" $k) (object "pw") }}`,
			wantWait: `a value its template needs after it read a Secret of node "pw" (withheld`, withheld: true},
		{name: "a limit after the read",
			template: configMap("conn", `data: {p: {{ `+password+` | repeat 100 | quote }}}`),
			limits:   &render.Limits{Steps: render.DefaultLimits.Steps, Time: render.DefaultLimits.Time, Bytes: 400, Objects: 10, StatusBytes: 100},
			wantErr:  `conn.yaml: the template failed after it read a Secret of node "pw"; its message is withheld`, withheld: true, limit: true},
		{name: "a name made from the data",
			template: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: '{{ " + password + " }}-X'}\n",
			wantErr:  `conn.yaml: the template failed after it read a Secret of node "pw"; its message is withheld`, withheld: true},
		{name: "an object other than a Secret may refer to it",
			template: configMap("conn", `data: {version: {{ object "pw" | need "metadata.resourceVersion" | quote }}}`)},
		{name: "an error before the read is shown",
			template: `{{ required "spec.extra is required" .Spec.Extra }}{{ object "pw" }}`,
			wantErr:  "spec.extra is required"},
		{name: "an error after reading a node that renders no Secret is shown",
			template: `{{ object "plain" | need "data.password" | printf "bad %s" | fail }}`,
			wantErr:  "bad " + value},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kind, err := loadDeclared(t, decl, map[string]string{
				"pw.yaml":    "apiVersion: v1\nkind: Secret\nmetadata: {name: pw}\ndata: {password: {{ generate 16 | b64enc | quote }}}\n",
				"plain.yaml": configMap("plain", ""),
				"conn.yaml":  tt.template,
			})
			if err != nil {
				t.Fatal(err)
			}
			if tt.limits != nil {
				kind = kind.WithLimits(*tt.limits)
			}
			plan, err := kind.RenderGraph(widget(testv1alpha1.WidgetSpec{}), render.GraphInput{Live: snapshot})
			said := waitsOrError(plan, err)
			if tt.withheld && (strings.Contains(said, value) || strings.Contains(said, "aHVudGVyMg")) {
				t.Fatalf("the render quotes the Secret's data: %s", said)
			}
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("error: %v, want one containing %q", err, tt.wantErr)
			}
			if tt.wantWait != "" && (plan == nil || !strings.Contains(waits(plan), "conn waits for "+tt.wantWait)) {
				t.Fatalf("waiting: %q, want conn waiting for %q", said, tt.wantWait)
			}
			if _, ok := errors.AsType[*render.LimitError](err); ok != tt.limit {
				t.Fatalf("error %v: a *render.LimitError is %v, want %v (its reason, LimitExceeded, depends on it)", err, ok, tt.limit)
			}
		})
	}
}
