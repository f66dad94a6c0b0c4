//go:build e2e

package e2e

import (
	"encoding/base64"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// generatingChart makes MyWeb a chart kind whose templates generate a
// password, a CA and a certificate the CA signs, as postgresql's and
// grafana's charts do on install, and derive a checksum of the Secret's
// template in a ConfigMap.
var generatingChart = map[string]string{
	"_kind.yaml":   "owns:\n- {apiVersion: v1, kind: ConfigMap}\n- {apiVersion: v1, kind: Secret}\n",
	"_chart.yaml":  "name: web\nversion: 0.1.0\n",
	"_values.yaml": "image: nginx\nnodePortNumber: 30000\npageContentHtml: hello\n",
	"_helpers.tpl": `{{- define "web.password" -}}{{ randAlphaNum 24 }}{{- end }}`,
	"secret.yaml": `{{- $ca := genCA "web-ca" 365 -}}
{{- $cert := genSignedCert (printf "%s-web" .Release.Name) nil (list (printf "%s.%s.svc" .Release.Name .Release.Namespace)) 365 $ca -}}
apiVersion: v1
kind: Secret
metadata:
  name: {{ .Release.Name }}-auth
data:
  password: {{ include "web.password" . | b64enc }}
  ca.crt: {{ $ca.Cert | b64enc }}
  tls.crt: {{ $cert.Cert | b64enc }}
  tls.key: {{ $cert.Key | b64enc }}
`,
	"configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-page
  annotations:
    checksum/auth: {{ include (print $.Template.BasePath "/secret.yaml") . | sha256sum }}
data:
  page: {{ .Values.pageContentHtml | quote }}
`,
}

// templatesWith writes a copy of templates/ with MyWeb's folder made of
// files, and returns its path.
func templatesWith(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "templates")
	if err := os.CopyFS(dir, os.DirFS("../templates")); err != nil {
		t.Fatal(err)
	}
	web := filepath.Join(dir, "myweb")
	if err := os.RemoveAll(web); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(web, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(web, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestGeneratedValuesSurvive: a chart kind's generated password and
// certificates, and the checksum derived from them, stay what the first
// render made across a value change, an operator restart, a second
// replica taking over from a killed leader, and an upgrade of the
// operator's templates (the chart's next version); they are never in the
// resource's status, and deleting the resource leaves nothing.
func TestGeneratedValuesSurvive(t *testing.T) {
	const ns = "generated"
	dir := templatesWith(t, generatingChart)
	useOperator(t, "generated", "--templates="+dir)
	t.Cleanup(func() { restoreOperator(t, "after-generated") })
	mustKubectl(t, "create", "namespace", ns)
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "namespace", ns, "--wait=false") })

	page := func(value string) {
		t.Helper()
		mustKubectl(t, "-n", ns, "apply", "-f", writeFile(t, fmt.Sprintf("apiVersion: operator.k8s-summit.org/v1\nkind: MyWeb\nmetadata: {name: web}\nspec: {image: nginx, nodePortNumber: 30000, pageContentHtml: %s}\n", value)))
		eventually(t, 60*time.Second, "the page "+value+" applied", func() error {
			if got, err := kubectl(t, "-n", ns, "get", "configmap", "web-page", "-o", "jsonpath={.data.page}"); got != value {
				return fmt.Errorf("page %q (%w)", got, err)
			}
			return nil
		})
		waitReady(t, ns, "myweb/web")
	}
	generated := func() map[string]string {
		t.Helper()
		out := map[string]string{}
		for _, key := range []string{"password", "ca.crt", "tls.crt", "tls.key"} {
			out[key] = mustKubectl(t, "-n", ns, "get", "secret", "web-auth", "-o", "jsonpath={.data."+strings.ReplaceAll(key, ".", `\.`)+"}")
		}
		out["checksum"] = mustKubectl(t, "-n", ns, "get", "configmap", "web-page", "-o", `jsonpath={.metadata.annotations.checksum/auth}`)
		return out
	}

	page("one")
	first := generated()
	for key, v := range first {
		if len(v) < 20 {
			t.Fatalf("%s: %q, not a generated value", key, v)
		}
	}
	same := func(when string) {
		t.Helper()
		if now := generated(); !maps.Equal(now, first) {
			for key := range first {
				if now[key] != first[key] {
					t.Errorf("%s: %s changed", when, key)
				}
			}
		}
	}

	page("two")
	same("after a value change")

	useOperator(t, "generated-restarted", "--templates="+dir)
	page("three")
	same("after the operator started again")

	standby, err := startBinary("generated-standby", filepath.Join(binDir, "stencil"), "--templates="+dir)
	if err != nil {
		t.Fatal(err)
	}
	leading := leader()
	current.kill()
	current = standby
	eventually(t, 60*time.Second, "the standby holds the Lease", func() error {
		if now := leader(); now == leading || now == "" {
			return fmt.Errorf("holder still %q", now)
		}
		return nil
	})
	page("four")
	same("after a second replica took over")

	// The operator upgraded: the chart's next version, a template edited
	// (a label), the Secret's template as it was.
	next := maps.Clone(generatingChart)
	next["_chart.yaml"] = "name: web\nversion: 0.2.0\n"
	next["configmap.yaml"] = strings.Replace(next["configmap.yaml"], "  annotations:\n", "  labels: {tier: web}\n  annotations:\n", 1)
	useOperator(t, "generated-upgraded", "--templates="+templatesWith(t, next))
	page("five")
	if got := mustKubectl(t, "-n", ns, "get", "configmap", "web-page", "-o", "jsonpath={.metadata.labels.tier}"); got != "web" {
		t.Errorf("the upgraded template's label: %q", got)
	}
	same("after an upgrade")

	// Never in the resource, its events or the operator's log: the
	// values as the Secret holds them, nor as the templates wrote them.
	seen := map[string]string{
		"the resource": mustKubectl(t, "-n", ns, "get", "myweb", "web", "-o", "yaml"),
		"the events":   mustKubectl(t, "-n", ns, "get", "events", "-o", "yaml"),
		"the log":      everyLog(t),
	}
	for key, v := range first {
		plain, err := base64.StdEncoding.DecodeString(v)
		if key == "checksum" || err != nil {
			continue
		}
		for where, text := range seen {
			if strings.Contains(text, v) || strings.Contains(text, string(plain)) {
				t.Errorf("%s shows the generated %s", where, key)
			}
		}
	}

	uid := mustKubectl(t, "-n", ns, "get", "myweb", "web", "-o", "jsonpath={.metadata.uid}")
	mustKubectl(t, "-n", ns, "get", "secret", "stencil-generated-"+uid)
	mustKubectl(t, "-n", ns, "delete", "myweb", "web", "--timeout=60s")
	eventually(t, 60*time.Second, "nothing left of the MyWeb", func() error {
		if out, _ := kubectl(t, "-n", ns, "get", "secrets,configmaps", "-o", "name"); strings.Contains(out, "web-") || strings.Contains(out, "stencil-generated-") {
			return fmt.Errorf("left: %s", out)
		}
		return nil
	})
}

// everyLog is every log the operators of the suite wrote so far.
func everyLog(t *testing.T) string {
	t.Helper()
	var all strings.Builder
	for _, op := range running {
		all.WriteString(readLog(t, op))
	}
	return all.String()
}
