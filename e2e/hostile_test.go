//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// probeChartFiles make MyWeb a chart kind whose resources may run
// templates (tpl: any, the most a kind can let its tenants do): its spec's
// pageContentHtml goes through tpl, and is printed as it is, unquoted.
var probeChartFiles = map[string]string{
	"_kind.yaml":   "owns:\n- {apiVersion: v1, kind: ConfigMap}\ntpl: any\n",
	"_chart.yaml":  "name: web\nversion: 0.1.0\n",
	"_values.yaml": "image: nginx\nnodePortNumber: 30000\npageContentHtml: hello\n",
	"configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-page
data:
  page: {{ tpl .Values.pageContentHtml . | quote }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-raw
data:
  raw: {{ .Values.pageContentHtml }}
`,
}

// TestHostileTenant: mallory, a tenant with a Role in one namespace only,
// writes what she may: MyWebs (here a chart kind that runs her values as
// templates) whose values would have crashed the operator or allocated
// gigabytes, or added an object; and Memcacheds whose conversion
// bookkeeping she forged. The operator keeps its PID and its other tenants:
// another namespace's MyWeb becomes Ready, her hostile ones are Stalled
// with nothing applied, the webhook still converts, what is stored stays
// inside the schema, and a list of Memcacheds at v1alpha1 across every
// namespace lists every one, even one whose conversion fails.
func TestHostileTenant(t *testing.T) {
	const mine, other = "hostile-a", "hostile-b"
	dir := templatesWith(t, probeChartFiles)
	// A conversion to v1alpha1 that fails for one value, as a template
	// bug would.
	to := filepath.Join(dir, "memcached", "_to-v1alpha1.yaml")
	src, err := os.ReadFile(to)
	if err != nil {
		t.Fatal(err)
	}
	broken := `{{- if eq (toString .spec.size) "13" }}{{ fail "13 is unlucky" }}{{ end }}` + "\n" + string(src)
	if err := os.WriteFile(to, []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	useOperator(t, "hostile", "--templates="+dir)
	t.Cleanup(func() { restoreOperator(t, "after-hostile") })
	pid := current.cmd.Process.Pid
	for _, ns := range []string{mine, other} {
		mustKubectl(t, "create", "namespace", ns)
		t.Cleanup(func() { _, _ = kubectl(t, "delete", "namespace", ns, "--wait=false") })
	}
	mustKubectl(t, "-n", mine, "create", "role", "tenant", "--verb=*", "--resource=mywebs.operator.k8s-summit.org,memcacheds.cache.example.com")
	mustKubectl(t, "-n", mine, "create", "rolebinding", "mallory", "--role=tenant", "--user=mallory")
	mallory := func(manifest string) {
		t.Helper()
		if out, err := kubectl(t, "--as=mallory", "-n", mine, "apply", "-f", writeFile(t, manifest)); err != nil {
			t.Fatalf("mallory's apply: %v\n%s", err, out)
		}
	}

	hostile := map[string]string{
		"cycle":    `{{ $m := dict }}{{ $_ := set $m "a" $m }}{{ $m }}`,
		"width":    `{{ printf "%999999999d" 1 }}`,
		"doubled":  `{{ $l := list 1 }}{{ range until 24 }}{{ $l = list $l $l }}{{ end }}{{ $l }}`,
		"document": "x\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: injected}\ndata: {a: b}",
	}
	for name, value := range hostile {
		mallory(fmt.Sprintf("apiVersion: operator.k8s-summit.org/v1\nkind: MyWeb\nmetadata: {name: %s}\nspec: {image: nginx, nodePortNumber: 30000, pageContentHtml: %q}\n", name, value))
	}
	// Another tenant's resource, after mallory's.
	mustKubectl(t, "-n", other, "apply", "-f", writeFile(t, "apiVersion: operator.k8s-summit.org/v1\nkind: MyWeb\nmetadata: {name: web}\nspec: {image: nginx, nodePortNumber: 30000, pageContentHtml: 'hello {{ .Release.Name }}'}\n"))
	waitReady(t, other, "myweb/web")
	if got := mustKubectl(t, "-n", other, "get", "configmap", "web-page", "-o", "jsonpath={.data.page}"); got != "hello web" {
		t.Errorf("the other tenant's page %q, want hello web", got)
	}
	for name := range hostile {
		mustKubectl(t, "-n", mine, "wait", "myweb/"+name, "--for=condition=Stalled", "--timeout=60s")
		if out := mustKubectl(t, "-n", mine, "get", "configmaps", "-o", "name"); strings.Contains(out, name+"-") || strings.Contains(out, "injected") {
			t.Errorf("a hostile MyWeb's objects were applied: %s", out)
		}
	}

	// Forged conversion bookkeeping: a value past v1's maximum of 100,
	// and a status.
	mallory(`apiVersion: cache.example.com/v1alpha1
kind: Memcached
metadata:
  name: forged
  annotations:
    stencil.dev/fields-of-v1: '{"fields":[{"path":["spec","size"],"value":100000,"changed":true,"back":3},{"path":["status","observedGeneration"],"value":99}]}'
spec: {size: 3}
`)
	if got := mustKubectl(t, "-n", mine, "get", "memcacheds.v1.cache.example.com", "forged", "-o", "jsonpath={.spec.size}/{.status.observedGeneration}"); strings.HasPrefix(got, "100000") || strings.HasSuffix(got, "/99") {
		t.Errorf("v1 stores size/observedGeneration %s: the forged fields were restored", got)
	}
	waitReady(t, mine, "memcached/forged")
	// One object whose conversion to v1alpha1 fails, in the other
	// namespace (written at v1, the storage version: nothing to convert).
	mustKubectl(t, "-n", other, "apply", "-f", writeFile(t, "apiVersion: cache.example.com/v1\nkind: Memcached\nmetadata: {name: unlucky}\nspec: {size: 13}\n"))
	list := mustKubectl(t, "get", "memcacheds.v1alpha1.cache.example.com", "-A", "-o", `jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}={.spec.size}{.metadata.annotations.stencil\.dev/conversion-failed} {end}`)
	for _, want := range []string{mine + "/forged=3", other + "/unlucky="} {
		if !strings.Contains(list, want) {
			t.Errorf("kubectl get memcacheds.v1alpha1 -A: %q, want %s in it", list, want)
		}
	}
	if !strings.Contains(list, "13 is unlucky") {
		t.Errorf("the unlucky Memcached is not listed as a placeholder saying why: %q", list)
	}

	select {
	case <-current.exited:
		t.Fatalf("the operator exited:\n%s", current.logTail())
	default:
	}
	if current.cmd.Process.Pid != pid {
		t.Errorf("the operator's PID changed from %d to %d", pid, current.cmd.Process.Pid)
	}
	// The webhook still converts, the unlucky one too once its value
	// changes.
	mustKubectl(t, "-n", other, "patch", "memcacheds.v1.cache.example.com", "unlucky", "--type=merge", "-p", `{"spec":{"size":2}}`)
	eventually(t, 30*time.Second, "the unlucky Memcached read at v1alpha1", func() error {
		got, err := kubectl(t, "-n", other, "get", "memcacheds.v1alpha1.cache.example.com", "unlucky", "-o", "jsonpath={.spec.size}")
		if err != nil {
			return err
		}
		if got != "2" {
			return fmt.Errorf("size %q, want 2", got)
		}
		return nil
	})
}

// TestTenantStrippedOwnerReferences: trudy, a tenant with a Role in one
// namespace, owns a FlightTicket whose templates (here) also render a
// cluster-scoped PriorityClass, which only the resource's deletion cleans
// up. She strips her ConfigMap's ownerReference (drift policy Report keeps
// it stripped) and deletes her FlightTicket normally, as if the garbage
// collector had orphaned it: the PriorityClass, beyond her namespace, is
// gone with it.
func TestTenantStrippedOwnerReferences(t *testing.T) {
	const ns = "stripped"
	dir := filepath.Join(t.TempDir(), "templates")
	if err := os.CopyFS(dir, os.DirFS("../templates")); err != nil {
		t.Fatal(err)
	}
	ticket := filepath.Join(dir, "flightticket")
	if err := os.RemoveAll(filepath.Join(ticket, "tests")); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"_kind.yaml":         "owns:\n- {apiVersion: v1, kind: ConfigMap, status: true}\n- {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, resource: priorityclasses, clusterScoped: true}\n",
		"priorityclass.yaml": "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata:\n  name: {{ printf \"ticket-%s-%s\" .Namespace .Name | quote }}\nvalue: 1000\n",
	} {
		if err := os.WriteFile(filepath.Join(ticket, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	mustKubectl(t, "create", "clusterrole", "stencil-priorityclasses", "--verb=*", "--resource=priorityclasses.scheduling.k8s.io")
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "clusterrole", "stencil-priorityclasses") })
	mustKubectl(t, "create", "clusterrolebinding", "stencil-priorityclasses", "--clusterrole=stencil-priorityclasses", "--serviceaccount=stencil-system:stencil")
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "clusterrolebinding", "stencil-priorityclasses") })
	useOperator(t, "stripped", "--templates="+dir)
	t.Cleanup(func() { restoreOperator(t, "after-stripped") })
	mustKubectl(t, "create", "namespace", ns)
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "namespace", ns, "--wait=false") })
	mustKubectl(t, "-n", ns, "create", "role", "tenant", "--verb=*", "--resource=flighttickets.flights.com,configmaps")
	mustKubectl(t, "-n", ns, "create", "rolebinding", "trudy", "--role=tenant", "--user=trudy")
	trudy := func(args ...string) string {
		t.Helper()
		out, err := kubectl(t, append([]string{"--as=trudy", "-n", ns}, args...)...)
		if err != nil {
			t.Fatalf("trudy: kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	trudy("apply", "-f", writeFile(t, "apiVersion: flights.com/v1\nkind: FlightTicket\nmetadata: {name: trip}\nspec: {from: Mumbai, to: London, number: 2, driftPolicy: Report}\n"))
	waitReady(t, ns, "flightticket/trip")
	const class = "ticket-" + ns + "-trip"
	mustKubectl(t, "get", "priorityclass", class)
	trudy("patch", "configmap", "trip-booking", "--type=json", "-p", `[{"op": "remove", "path": "/metadata/ownerReferences"}]`)
	mustKubectl(t, "-n", ns, "wait", "flightticket/trip", "--for=condition=Drifted", "--timeout=60s")
	trudy("delete", "flightticket", "trip", "--wait=false")
	eventually(t, 60*time.Second, "the FlightTicket and its PriorityClass gone", func() error {
		for _, args := range [][]string{{"-n", ns, "get", "flightticket", "trip"}, {"get", "priorityclass", class}} {
			out, err := kubectl(t, append(args, "--ignore-not-found", "-o", "name")...)
			if err != nil {
				return err
			}
			if out != "" {
				return fmt.Errorf("still there: %s", out)
			}
		}
		return nil
	})
	// Her namespace's ConfigMap, whose ownerReference she stripped, is
	// hers to keep.
	if out := mustKubectl(t, "-n", ns, "get", "configmap", "trip-booking", "--ignore-not-found", "-o", "name"); out == "" {
		t.Error("the stripped ConfigMap was deleted")
	}
}
