package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// widgetCRD is a type of the test's own, which a FlightTicket owns as an
// optional type in optionalWidget's templates.
const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.e2e.stencil.dev}
spec:
  group: e2e.stencil.dev
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {size: {type: string}}}
`

// optionalWidget is a copy of templates/ whose FlightTicket also owns an
// optional Widget, rendered when the cluster serves it, and the --crds
// flag that gives the Widget's CRD.
func optionalWidget(t *testing.T) (dir, crds string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "templates")
	if err := os.CopyFS(dir, os.DirFS("../../templates")); err != nil {
		t.Fatal(err)
	}
	kind := filepath.Join(dir, "flightticket")
	declared, err := os.ReadFile(filepath.Join(kind, "_kind.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := filepath.Join(t.TempDir(), "widget-crd.yaml")
	for file, content := range map[string]string{
		filepath.Join(kind, "_kind.yaml"): string(declared) + "- {apiVersion: e2e.stencil.dev/v1, kind: Widget, optional: true}\n",
		filepath.Join(kind, "widget.yaml"): `{{- if (capabilities).APIVersions.Has "e2e.stencil.dev/v1/Widget" }}
apiVersion: e2e.stencil.dev/v1
kind: Widget
metadata: {name: {{ printf "%s-widget" .Name | quote }}}
spec: {size: {{ .Spec.Number | quote }}}
{{- end }}
`,
		crd: widgetCRD,
	} {
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir, repoCRDs + "," + crd
}

// TestAPIVersionsFlag: render, test and lint answer (capabilities) from
// --api-versions: an optional owned type is served when it names the type
// or its group/version, in one flag or several, a list or not; without it,
// none is.
func TestAPIVersionsFlag(t *testing.T) {
	dir, crds := optionalWidget(t)
	tests := []struct {
		name string
		// flags are the --api-versions given.
		flags []string
		// widget: the FlightTicket renders its Widget.
		widget bool
	}{
		{name: "none: not served", flags: nil, widget: false},
		{name: "the type", flags: []string{"--api-versions=e2e.stencil.dev/v1/Widget"}, widget: true},
		{name: "its group/version", flags: []string{"--api-versions=e2e.stencil.dev/v1"}, widget: true},
		{name: "a comma list", flags: []string{"--api-versions=cert-manager.io/v1,e2e.stencil.dev/v1/Widget"}, widget: true},
		{name: "repeated", flags: []string{"--api-versions=cert-manager.io/v1", "--api-versions=e2e.stencil.dev/v1"}, widget: true},
		{name: "another version", flags: []string{"--api-versions=e2e.stencil.dev/v2"}, widget: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, code, err := execute(t, append([]string{"render", crds, "--templates", dir, "-f", "../../config/samples/flightticket.yaml"}, tt.flags...)...)
			if code != 0 {
				t.Fatalf("render exited %d: %v\n%s", code, err, out)
			}
			if got := strings.Contains(out, "kind: Widget"); got != tt.widget {
				t.Errorf("Widget rendered: %v, want %v\n%s", got, tt.widget, out)
			}
			if !strings.Contains(out, "name: my-flight-ticket-booking") {
				t.Errorf("the ConfigMap is not rendered:\n%s", out)
			}
			// lint renders the samples with the same answer, every object valid.
			if out, code, err := execute(t, append([]string{"lint", crds, "--templates", dir, "-f", "../../config/samples/flightticket.yaml"}, tt.flags...)...); code != 0 {
				t.Errorf("lint exited %d: %v\n%s", code, err, out)
			}
		})
	}
}

// TestAPIVersionsOfATestCase: a case's api-versions.txt says which optional
// types are served in it, whatever --api-versions says; the other cases
// follow --api-versions.
func TestAPIVersionsOfATestCase(t *testing.T) {
	dir, crds := optionalWidget(t)
	served := filepath.Join(dir, "flightticket", "tests", "served")
	if err := os.MkdirAll(served, 0o755); err != nil {
		t.Fatal(err)
	}
	input, err := os.ReadFile(filepath.Join(dir, "flightticket", "tests", "seed", "input.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for file, content := range map[string]string{
		"input.yaml":       string(input),
		"api-versions.txt": "# the cluster has the Widget CRD\ne2e.stencil.dev/v1/Widget\n",
		"fragments.yaml":   "apiVersion: e2e.stencil.dev/v1\nkind: Widget\nmetadata: {name: my-flight-ticket-widget}\n",
	} {
		if err := os.WriteFile(filepath.Join(served, file), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The seed and full cases' expected.yaml hold no Widget: they pass
	// with none served, and fail when --api-versions serves it.
	tests := []struct {
		name string
		// flags are the --api-versions given.
		flags []string
		// code is the exit code, says what the output holds.
		code int
		says string
	}{
		{name: "none served but in the case", code: 0, says: "ok: 3 template tests"},
		{name: "served everywhere", flags: []string{"--api-versions=e2e.stencil.dev/v1"}, code: 1, says: "FAIL flightticket/seed: expected.yaml differs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, code, err := execute(t, append([]string{"test", crds, "--templates", dir, "flightticket"}, tt.flags...)...)
			if code != tt.code || !strings.Contains(out, tt.says) {
				t.Fatalf("test exited %d (%v), want %d saying %q:\n%s", code, err, tt.code, tt.says, out)
			}
		})
	}
	// A line that names no optional type fails the case.
	if err := os.WriteFile(filepath.Join(served, "api-versions.txt"), []byte("e2e.stencil.dev/v1/Gadget\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code, _ := execute(t, "test", crds, "--templates", dir, "flightticket"); code != 1 || !strings.Contains(out, "names no optional owned type") {
		t.Fatalf("test exited %d, want 1 naming the line:\n%s", code, out)
	}
}
