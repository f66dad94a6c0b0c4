//go:build e2e

package e2e

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
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
}

// scrape GETs the metrics endpoint with token as bearer token (none when
// empty). The certificate is the operator's self-signed one.
func scrape(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a self-signed certificate on loopback
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
