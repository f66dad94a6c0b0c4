package scaffold

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stencil-operator/stencil/internal/dev/localcluster"
)

// evolveGuide is what docs/evolve-api.md's "In your own project" runs and
// writes: its shell blocks' commands, and its file blocks by the path
// that introduces each.
type evolveGuide struct {
	commands [][]string        // each shell block's lines
	files    map[string]string // path → block
}

// readEvolveGuide reads the section, and fails unless its commands are the
// ones checkEvolveAPI runs.
func readEvolveGuide(t *testing.T) evolveGuide {
	t.Helper()
	data, err := os.ReadFile("../../../docs/evolve-api.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## In your own project\n")
	if !ok {
		t.Fatal(`docs/evolve-api.md has no "In your own project" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	g := evolveGuide{files: map[string]string{}}
	block := regexp.MustCompile("(?s)(`[^`\n]+`)?[^`\n]*\n\n```(sh|go|yaml)\n(.*?)```")
	for _, m := range block.FindAllStringSubmatch(section, -1) {
		switch m[2] {
		case "sh":
			g.commands = append(g.commands, strings.Split(strings.TrimSpace(m[3]), "\n"))
		case "go":
			g.files["api/widgets/v1/widget_types.go"] = m[3]
		default:
			g.files[strings.Trim(m[1], "`")] = m[3]
		}
	}
	want := [][]string{{"make api-version KIND=Widget VERSION=v1"}, {"make generate manifests", "make test", "make run"}}
	if !slices.EqualFunc(g.commands, want, slices.Equal) {
		t.Fatalf("docs/evolve-api.md's own project runs %q; this test follows %q", g.commands, want)
	}
	for _, f := range []string{"api/widgets/v1/widget_types.go", "templates/widget/configmap.yaml", "templates/widget/_kind.yaml"} {
		if g.files[f] == "" {
			t.Fatalf("docs/evolve-api.md's own project shows no %s (it shows %v)", f, slices.Sorted(maps.Keys(g.files)))
		}
	}
	return g
}

// checkEvolveAPI follows docs/evolve-api.md's "In your own project" in
// the project TestInitProjectRunsAndPasses made: make api-version gives
// the Widget a v1, the guide's edits change it (a field v1alpha1 has no
// place for), stencil lint refuses the change until _kind.yaml declares
// the field dropped, as the guide says; then make test passes and make run
// converts: the v1 sample reads at v1alpha1, and a Widget written at v1
// with the new field, read and written back at v1alpha1, keeps it.
func checkEvolveAPI(t *testing.T, dir string, env []string) {
	t.Helper()
	g := readEvolveGuide(t)
	step(t, dir, env, "make", "api-version", "KIND=Widget", "VERSION=v1")
	types := filepath.Join(dir, "api", "widgets", "v1", "widget_types.go")
	src, err := os.ReadFile(types)
	if err != nil {
		t.Fatal(err)
	}
	spec := regexp.MustCompile(`(?s)type WidgetSpec struct \{.*?\n\}\n`)
	if !spec.Match(src) {
		t.Fatalf("%s declares no WidgetSpec", types)
	}
	writeTestFile(t, types, spec.ReplaceAllLiteralString(string(src), g.files["api/widgets/v1/widget_types.go"]))
	writeTestFile(t, filepath.Join(dir, "templates", "widget", "configmap.yaml"), g.files["templates/widget/configmap.yaml"])
	step(t, dir, env, "make", "generate", "manifests")
	if out, err := runFails(dir, env, "go", "run", ".", "lint"); err == nil || !strings.Contains(out, "spec.uppercase of v1 is lost converting to v1alpha1 and back") {
		t.Errorf("stencil lint before the field is declared dropped: %v, %s; want the guide's refusal", err, out)
	}
	declaration := filepath.Join(dir, "templates", "widget", "_kind.yaml")
	before, err := os.ReadFile(declaration)
	if err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, declaration, string(before)+g.files["templates/widget/_kind.yaml"])
	step(t, dir, env, "make", "generate", "manifests")
	if out := step(t, dir, env, "make", "test"); !strings.Contains(out, "ok  \texample.com/widgets") {
		t.Errorf("the project's make test after the new version:\n%s", out)
	}
	if out := step(t, dir, env, "go", "run", ".", "test"); !strings.Contains(out, "ok   widget/v1alpha1") {
		t.Errorf("the template tests have no case at v1alpha1:\n%s", out)
	}
	checkMakeRun(t, dir, env, func(kubectl func(args ...string) (string, error)) { checkConverts(t, kubectl) })
	checkDeploy(t, dir, env)
}

// checkDeploy runs the project's make deploy against a local control
// plane: the installer applies, and the Service the CRD sends conversions
// to (the kind now has two versions) is the one the installer made.
func checkDeploy(t *testing.T, dir string, env []string) {
	t.Helper()
	cluster, err := localcluster.Start(t.Context(), localcluster.Options{APIServerOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Stop() })
	env = append(slices.Clone(env), "KUBECONFIG="+cluster.Kubeconfig)
	step(t, dir, env, "make", "deploy", "IMG=example.com/widgets:v1")
	kubectl := filepath.Join(dir, "bin", "kubectl")
	crd, err := runFails(dir, env, kubectl, "get", "crd", "widgetz.widgets.example.com", "-o",
		"jsonpath={.spec.conversion.webhook.clientConfig.service.namespace}/{.spec.conversion.webhook.clientConfig.service.name}")
	if err != nil {
		t.Fatalf("the CRD: %v\n%s", err, crd)
	}
	ns, name, _ := strings.Cut(crd, "/")
	if out, err := runFails(dir, env, kubectl, "get", "service", "-n", ns, name); err != nil || ns != "widgets-system" || name != "widgets-webhook" {
		t.Errorf("the CRD sends conversions to the Service %s/%s: %v\n%s", ns, name, err, out)
	}
}

// checkConverts: through the API server and the operator's conversion
// webhook, the v1 sample reads at v1alpha1; uppercase set at v1 survives
// a write at v1alpha1, and the ConfigMap follows both.
func checkConverts(t *testing.T, kubectl func(args ...string) (string, error)) {
	t.Helper()
	const v1, v1alpha1 = "widget.v1.widgets.example.com", "widget.v1alpha1.widgets.example.com"
	must := func(args ...string) string {
		t.Helper()
		out, err := kubectl(args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	if got := must("get", v1alpha1, "example-widget", "-o", "jsonpath={.apiVersion}"); got != "widgets.example.com/v1alpha1" {
		t.Errorf("the sample read at v1alpha1 has apiVersion %q", got)
	}
	must("patch", v1, "example-widget", "--type=merge", "-p", `{"spec":{"uppercase":true}}`)
	var old map[string]any
	if err := json.Unmarshal([]byte(must("get", v1alpha1, "example-widget", "-o", "json")), &old); err != nil {
		t.Fatal(err)
	}
	spec, _ := old["spec"].(map[string]any)
	if _, ok := spec["uppercase"]; ok || spec == nil {
		t.Fatalf("the Widget at v1alpha1 has spec %v; want no uppercase", spec)
	}
	spec["message"] = "hello again"
	data, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "widget.json")
	writeTestFile(t, file, string(data))
	must("replace", "-f", file)
	if got := must("get", v1, "example-widget", "-o", "jsonpath={.spec.uppercase} {.spec.message}"); got != "true hello again" {
		t.Errorf("the Widget written back at v1alpha1 reads at v1 as %q; want uppercase kept: \"true hello again\"", got)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		got, err := kubectl("get", "configmap", "example-widget", "-o", "jsonpath={.data.message}")
		if err == nil && got == "HELLO AGAIN" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ConfigMap's message is %q (%v), want \"HELLO AGAIN\"", got, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func writeTestFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// runFails runs name args in dir, which may fail, and returns its combined
// output.
func runFails(dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return string(out), nil
}
