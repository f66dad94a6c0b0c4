//go:build e2e

package e2e

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// webChart is a chart of a Deployment and a ConfigMap whose values are
// MyWeb's spec, at version 0.1.0.
var webChart = map[string]string{
	"Chart.yaml":  "apiVersion: v2\nname: web\nversion: 0.1.0\n",
	"values.yaml": "image: nginx\nnodePortNumber: 30000\npageContentHtml: hello\n",
	"templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  replicas: 1
  selector:
    matchLabels: {app: {{ .Release.Name }}}
  template:
    metadata:
      labels: {app: {{ .Release.Name }}}
    spec:
      containers:
      - name: web
        image: {{ .Values.image }}
`,
	"templates/configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-page
data:
  page: {{ .Values.pageContentHtml | quote }}
`,
}

// writeTree writes files (by slash path) under a new folder.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// importChart runs bin/stencil import chart in the project at root.
func importChart(t *testing.T, root, chart string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "stencil"), "import", "chart", chart, "--group", "operator.k8s-summit.org", "--version", "v1", "--kind", "MyWeb")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("stencil import chart %s: %v\n%s", chart, err, out)
	}
	return string(out)
}

// TestChartUpgradeByReimport: a project's MyWeb kind is a chart's import,
// running over several MyWebs. The chart's next version is imported over
// it; stencil diff --all with the project's templates previews what it
// changes in every MyWeb (and nothing in the other kinds); the operator
// with the new templates rolls it out one MyWeb at a time
// (--rollout-batch=1), each waiting for the one before to be Ready.
func TestChartUpgradeByReimport(t *testing.T) {
	const ns, n = "chartup", 5
	// Only this test's MyWebs: the rollout is per kind, cluster-wide.
	mustKubectl(t, "delete", "myweb", "--all", "--all-namespaces", "--wait=true", "--timeout=60s")
	// The project: the operator's templates, with MyWeb a kind an
	// import of the chart made.
	root := writeTree(t, map[string]string{
		"go.mod":                         "module example.com/webs\n\ngo 1.26\n",
		"api/operator/v1/myweb_types.go": "package v1\n",
	})
	templates := filepath.Join(root, "templates")
	if err := os.CopyFS(templates, os.DirFS("../templates")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(templates, "myweb")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(templates, "myweb"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(templates, "myweb", "_chart.yaml"), []byte("name: web\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	importChart(t, root, writeTree(t, webChart))

	useOperator(t, "chart-0.1.0", "--templates="+templates)
	t.Cleanup(func() { restoreOperator(t, "after-chart-upgrade") })
	mustKubectl(t, "create", "namespace", ns)
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "namespace", ns, "--wait=false") })
	var crs strings.Builder
	for i := range n {
		fmt.Fprintf(&crs, "---\napiVersion: operator.k8s-summit.org/v1\nkind: MyWeb\nmetadata: {name: web-%d, namespace: %s}\nspec: {image: nginx, nodePortNumber: %d, pageContentHtml: hello}\n", i, ns, 30300+i)
	}
	mustKubectl(t, "apply", "-f", writeFile(t, crs.String()))
	mustKubectl(t, "-n", ns, "wait", "myweb", "--all", "--for=condition=Ready", "--timeout=90s")
	v1 := mywebs(t)[ns+"/web-0"].Status.Templates

	// The chart's next version: a label on the pods, a new value.
	next := maps.Clone(webChart)
	next["Chart.yaml"] = "apiVersion: v2\nname: web\nversion: 0.2.0\n"
	next["values.yaml"] += "banner: welcome\n"
	next["templates/deployment.yaml"] = strings.Replace(next["templates/deployment.yaml"], "      labels: {app: {{ .Release.Name }}}\n", "      labels: {app: {{ .Release.Name }}, version: \"2\"}\n", 1)
	next["templates/configmap.yaml"] += "  banner: {{ .Values.banner | quote }}\n"
	out := importChart(t, root, writeTree(t, next))
	for _, want := range []string{"from chart version 0.1.0 to 0.2.0", "templates/myweb/deployment.yaml", "+ banner (default welcome)"} {
		if !strings.Contains(out, want) {
			t.Errorf("the re-import does not say %q:\n%s", want, out)
		}
	}

	// The preview: every MyWeb changes, 2 objects each; no other kind.
	out, code := stencil(t, "diff", "--all", "--templates", templates)
	t.Logf("stencil diff --all --templates (exit %d):\n%s", code, out)
	if want := regexp.MustCompile(fmt.Sprintf(`(?m)^MyWeb +%d +0 +%d +0 +0 +%d +0\s*$`, n, n, 2*n)); code != 1 || !want.MatchString(out) {
		t.Errorf("diff --all: exit %d, want 1 and all %d MyWebs changed (2 objects each)", code, n)
	}
	if others := regexp.MustCompile(`(?m)^(FlightTicket|Foo|Guestbook|Memcached) +(\d+) +(\d+) +0 +0 +0 +0 +0\s*$`).FindAllStringSubmatch(out, -1); len(others) != 4 {
		t.Errorf("diff --all: want the 4 kinds whose templates did not change unchanged")
	}
	if got := mustKubectl(t, "-n", ns, "get", "configmap", "web-0-page", "-o", "jsonpath={.data.banner}"); got != "" {
		t.Errorf("the preview wrote: banner %q", got)
	}

	// The rollout, paced.
	watch := watchRollout(t, v1)
	useOperator(t, "chart-0.2.0", "--templates="+templates, "--rollout-batch=1")
	eventually(t, 180*time.Second, "every MyWeb has the chart's next version and is Ready", func() error {
		for key, w := range mywebs(t) {
			if w.Status.Templates == v1 || w.condition("Ready").Status != "True" {
				return fmt.Errorf("%s: templates %s, Ready %+v", key, w.Status.Templates, w.condition("Ready"))
			}
		}
		return nil
	})
	for i := range n {
		if got := mustKubectl(t, "-n", ns, "get", "deployment", fmt.Sprintf("web-%d", i), "-o", "jsonpath={.spec.template.metadata.labels.version}"); got != "2" {
			t.Errorf("web-%d's pods: version label %q", i, got)
		}
	}
	most, counts := watch()
	t.Logf("at most %d reached and not Ready at once; %d steps seen", most, counts)
	if most > 1 {
		t.Errorf("up to %d MyWebs were reached by the rollout and not Ready at once; the batch is 1", most)
	}
	if counts < 3 {
		t.Errorf("the number of MyWebs reached took %d values; want the rollout seen in steps", counts)
	}
}
