//go:build e2e

package e2e

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// TestMetricsNeedAuthorization scrapes the running operator's metrics, as
// config/manager serves them (--metrics-secure): HTTPS, and only for a
// client that the API server authenticates and authorizes to GET /metrics,
// as the ClusterRole stencil-metrics-reader does. The operator runs as its
// ServiceAccount, so this also proves config/rbac lets it ask.
func TestMetricsNeedAuthorization(t *testing.T) {
	mustKubectl(t, "apply", "-f", "../config/samples/flightticket.yaml")
	waitReady(t, "default", "flightticket/my-flight-ticket")
	token := func(sa string) string {
		mustKubectl(t, "-n", "default", "create", "serviceaccount", sa)
		return strings.TrimSpace(mustKubectl(t, "-n", "default", "create", "token", sa))
	}
	// Two ServiceAccounts: the operator remembers a refusal for 10 s.
	stranger, scraper := token("stranger"), token("scraper")
	mustKubectl(t, "create", "clusterrolebinding", "scraper-stencil-metrics",
		"--clusterrole=stencil-metrics-reader", "--serviceaccount=default:scraper")

	if code, body := scrape(t, current.metrics, ""); code != http.StatusUnauthorized || strings.Contains(body, "stencil_") {
		t.Errorf("no token: status %d, want 401 and no metrics", code)
	}
	if code, body := scrape(t, current.metrics, "not-a-token"); code != http.StatusUnauthorized || strings.Contains(body, "stencil_") {
		t.Errorf("a bad token: status %d, want 401 and no metrics", code)
	}
	if code, body := scrape(t, current.metrics, stranger); code != http.StatusForbidden || strings.Contains(body, "stencil_") {
		t.Errorf("a ServiceAccount not bound to stencil-metrics-reader: status %d, want 403 and no metrics", code)
	}
	var body string
	eventually(t, 30*time.Second, "metrics served to the bound ServiceAccount", func() error {
		code, b := scrape(t, current.metrics, scraper)
		if code != http.StatusOK {
			return fmt.Errorf("status %d", code)
		}
		body = b
		return nil
	})
	for _, want := range []string{`stencil_applied_objects_total{kind="FlightTicket"}`, `stencil_unhealthy_resources{condition="Ready",kind="FlightTicket"} `, `controller_runtime_reconcile_total{controller="flightticket"`} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// config/prometheus alerts on these metrics: each must be served.
	for _, name := range regexp.MustCompile(`stencil_[a-z_]+`).FindAllString(mustKubectl(t, "kustomize", "../config/prometheus"), -1) {
		if !served(body, name) {
			t.Errorf("config/prometheus uses %s, which stencil does not serve", name)
		}
	}
	// So does every panel of the Grafana dashboard.
	for _, expr := range dashboardQueries(t, "../config/grafana/stencil.json") {
		for _, name := range regexp.MustCompile(`\b(stencil|controller_runtime|workqueue|rest_client)_[a-z_]+`).FindAllString(expr, -1) {
			if !served(body, name) {
				t.Errorf("the dashboard queries %s (%s), which stencil does not serve", name, expr)
			}
		}
	}
}

// served reports whether a scraped body has a sample of the metric name,
// with labels or without.
func served(body, name string) bool {
	return strings.Contains(body, "\n"+name+"{") || strings.Contains(body, "\n"+name+" ")
}

// dashboardQueries are the queries of every panel of a Grafana dashboard;
// each panel must have one.
func dashboardQueries(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var dashboard struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dashboard); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var exprs []string
	for _, p := range dashboard.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			exprs = append(exprs, target.Expr)
		}
	}
	if len(exprs) == 0 {
		t.Errorf("%s has no queries", path)
	}
	return exprs
}

// TestServiceMonitorFindsTheMetricsService: config/prometheus's
// ServiceMonitor selects the Service of config/manager and names its port.
func TestServiceMonitorFindsTheMetricsService(t *testing.T) {
	monitor := objectOfKind(t, "../config/prometheus", "ServiceMonitor")
	service := objectNamed(t, "../config/manager", "Service", "stencil-metrics")
	if monitor.GetNamespace() != service.GetNamespace() {
		t.Errorf("ServiceMonitor in %q, Service in %q", monitor.GetNamespace(), service.GetNamespace())
	}
	selector, _, _ := unstructured.NestedStringMap(monitor.Object, "spec", "selector", "matchLabels")
	if !labels.SelectorFromSet(selector).Matches(labels.Set(service.GetLabels())) {
		t.Errorf("ServiceMonitor selects %v; the Service has labels %v", selector, service.GetLabels())
	}
	endpoints, _, _ := unstructured.NestedSlice(monitor.Object, "spec", "endpoints")
	ports, _, _ := unstructured.NestedSlice(service.Object, "spec", "ports")
	if len(endpoints) != 1 || len(ports) != 1 {
		t.Fatalf("%d endpoints and %d ports, want one each", len(endpoints), len(ports))
	}
	if want, got := ports[0].(map[string]any)["name"], endpoints[0].(map[string]any)["port"]; got != want {
		t.Errorf("ServiceMonitor scrapes port %v; the Service's port is %v", got, want)
	}
}

// objectNamed is the object of kind named name that `kubectl kustomize
// dir` builds.
func objectNamed(t *testing.T, dir, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for doc := range strings.SplitSeq(mustKubectl(t, "kustomize", dir), "\n---\n") {
		o := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &o.Object); err != nil {
			t.Fatal(err)
		}
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("%s builds no %s %s", dir, kind, name)
	return nil
}

// objectOfKind is the one object of kind that `kubectl kustomize dir` builds.
func objectOfKind(t *testing.T, dir, kind string) *unstructured.Unstructured {
	t.Helper()
	var found *unstructured.Unstructured
	for doc := range strings.SplitSeq(mustKubectl(t, "kustomize", dir), "\n---\n") {
		o := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &o.Object); err != nil {
			t.Fatal(err)
		}
		if o.GetKind() == kind {
			if found != nil {
				t.Fatalf("%s builds two %ss", dir, kind)
			}
			found = o
		}
	}
	if found == nil {
		t.Fatalf("%s builds no %s", dir, kind)
	}
	return found
}

// scrape GETs the metrics endpoint with token as bearer token (none when
// empty). The certificate is the operator's self-signed one.
func scrape(t *testing.T, url, token string) (int, string) {
	t.Helper()
	code, body, err := tryScrape(t, url, token)
	if err != nil {
		t.Fatal(err)
	}
	return code, body
}

// tryScrape is scrape that returns an error (a process that is not
// listening yet) for the caller to retry.
func tryScrape(t *testing.T, url, token string) (int, string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a self-signed certificate on loopback
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", err
	}
	return resp.StatusCode, string(b), nil
}
