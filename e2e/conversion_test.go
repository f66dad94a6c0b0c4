//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestConversionWebhook: Memcached has two versions, v1 (the hub, stored)
// and v1alpha1, which stencil's conversion templates convert through its
// webhook (the local control plane calls it at --webhook-url). Clients
// read and write both versions; the fields of each survive; a conversion
// template that fails answers the client with the kind, versions and
// template, counts in stencil_conversions_total, and other kinds keep
// working.
func TestConversionWebhook(t *testing.T) {
	const ns = "conversion"
	dir := filepath.Join(t.TempDir(), "templates")
	if err := os.CopyFS(dir, os.DirFS("../templates")); err != nil {
		t.Fatal(err)
	}
	// A conversion that fails for one value, as a template bug would.
	from := filepath.Join(dir, "memcached", "_from-v1alpha1.yaml")
	src, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	broken := `{{- if eq (toString .spec.size) "13" }}{{ fail "13 is unlucky" }}{{ end }}` + "\n" + string(src)
	if err := os.WriteFile(from, []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	useOperator(t, "conversion", "--templates="+dir)
	t.Cleanup(func() { restoreOperator(t, "after-conversion") })
	mustKubectl(t, "create", "namespace", ns)
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "namespace", ns, "--wait=false") })

	if got := mustKubectl(t, "get", "crd", "memcacheds.cache.example.com", "-o", "jsonpath={.spec.conversion.strategy} {.spec.conversion.webhook.clientConfig.url}"); !strings.HasPrefix(got, "Webhook https://127.0.0.1:") {
		t.Fatalf("the CRD's conversion: %q, want the webhook at this operator's URL", got)
	}
	// Written at v1alpha1, as the operator-sdk guide writes it.
	mustKubectl(t, "-n", ns, "apply", "-f", writeFile(t, "apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata: {name: old}\nspec: {size: 2, autoscaled: true}\n"))
	waitReady(t, ns, "memcached/old")
	get := func(version, path string) string {
		t.Helper()
		return mustKubectl(t, "-n", ns, "get", "memcacheds."+version+".cache.example.com", "old", "-o", "jsonpath="+path)
	}
	if got := get("v1", "{.spec.size} {.spec.autoscaling.enabled}"); got != "2 true" {
		t.Errorf("v1 reads %q, want size 2 and autoscaling.enabled true", got)
	}
	if got := mustKubectl(t, "-n", ns, "get", "deployment", "old", "-o", "jsonpath={.spec.replicas} {.metadata.annotations.stencil\\.dev/hand-over}"); got != "2 spec.replicas" {
		t.Errorf("the Deployment: %q, want 2 replicas handed over", got)
	}
	// Written at v1, read at v1alpha1.
	mustKubectl(t, "-n", ns, "patch", "memcacheds.v1.cache.example.com", "old", "--type=merge", "-p", `{"spec":{"size":3}}`)
	if got := get("v1alpha1", "{.spec.size} {.spec.autoscaled}"); got != "3 true" {
		t.Errorf("v1alpha1 reads %q after a v1 write, want size 3 and autoscaled true", got)
	}
	// Written at v1alpha1 again: the status stencil wrote through v1 stays.
	mustKubectl(t, "-n", ns, "patch", "memcacheds.v1alpha1.cache.example.com", "old", "--type=merge", "-p", `{"spec":{"size":1}}`)
	eventually(t, 60*time.Second, "the v1alpha1 write reaches the Deployment", func() error {
		if got := mustKubectl(t, "-n", ns, "get", "memcacheds.v1alpha1.cache.example.com", "old", "-o", "jsonpath={.status.observedGeneration}/{.metadata.generation}"); !strings.HasSuffix(got, "/3") || strings.Split(got, "/")[0] != "3" {
			return fmt.Errorf("observedGeneration/generation %s", got)
		}
		return nil
	})
	// A conversion that fails: the client learns which and why.
	out, err := kubectl(t, "-n", ns, "apply", "-f", writeFile(t, "apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata: {name: unlucky}\nspec: {size: 13}\n"))
	if err == nil {
		t.Fatalf("a v1alpha1 write the conversion fails was accepted:\n%s", out)
	}
	for _, want := range []string{"Memcached", "from v1alpha1 to v1", "_from-v1alpha1.yaml", "13 is unlucky"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the client's error does not say %q: %v", want, err)
		}
	}
	// Other kinds go on.
	mustKubectl(t, "-n", ns, "apply", "-f", "../config/samples/flightticket.yaml")
	waitReady(t, ns, "flightticket/my-flight-ticket")
	mustKubectl(t, "-n", ns, "create", "serviceaccount", "conversion-scraper")
	mustKubectl(t, "create", "clusterrolebinding", "conversion-scraper", "--clusterrole=stencil-metrics-reader", "--serviceaccount="+ns+":conversion-scraper")
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "clusterrolebinding", "conversion-scraper") })
	token := strings.TrimSpace(mustKubectl(t, "-n", ns, "create", "token", "conversion-scraper"))
	eventually(t, 30*time.Second, "stencil_conversions_total counts the failure", func() error {
		code, body := scrape(t, current.metrics, token)
		if code != http.StatusOK {
			return fmt.Errorf("status %d", code)
		}
		for _, want := range []string{`stencil_conversions_total{from="v1alpha1",kind="Memcached",result="failure",to="v1"}`, `stencil_conversions_total{from="v1alpha1",kind="Memcached",result="success",to="v1"}`, `stencil_conversions_total{from="v1",kind="Memcached",result="success",to="v1alpha1"}`} {
			if !strings.Contains(body, want) {
				return fmt.Errorf("no %s", want)
			}
		}
		return nil
	})
}
