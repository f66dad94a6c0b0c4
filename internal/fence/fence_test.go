package fence

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The fence lets writes through only within its window after a successful
// write of the Lease was sent; reads, the Lease itself and the reviews of
// scrapers always go.
func TestFence(t *testing.T) {
	leaseStatus := http.StatusOK
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/leases/") {
			w.WriteHeader(leaseStatus)
		}
	}))
	defer server.Close()
	now := time.Unix(1000, 0)
	f := New("stencil.stencil.dev", 10*time.Second)
	f.now = func() time.Time { return now }
	client := &http.Client{Transport: f.Wrap(http.DefaultTransport)}
	do := func(method, path string) error {
		var body io.Reader
		if method == http.MethodPost && strings.HasSuffix(path, "/leases") {
			body = strings.NewReader(`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"stencil.stencil.dev"}}`)
		}
		req, err := http.NewRequest(method, server.URL+path, body)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		return err
	}
	const (
		lease      = "/apis/coordination.k8s.io/v1/namespaces/stencil-system/leases/stencil.stencil.dev"
		leases     = "/apis/coordination.k8s.io/v1/namespaces/stencil-system/leases"
		otherLease = "/apis/coordination.k8s.io/v1/namespaces/stencil-system/leases/someone-else"
		configMap  = "/api/v1/namespaces/ns/configmaps/cm"
		review     = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
	)
	steps := []struct {
		name         string
		advance      time.Duration
		leaseStatus  int
		method, path string
		refused      bool
	}{
		{"a write before the Lease is ever held", 0, 0, http.MethodPatch, configMap, true},
		{"a read is never fenced", 0, 0, http.MethodGet, configMap, false},
		{"a scraper's review is never fenced", 0, 0, http.MethodPost, review, false},
		{"another Lease is not ours", 0, 0, http.MethodPut, otherLease, true},
		{"a failed acquisition", 0, http.StatusConflict, http.MethodPut, lease, false},
		{"still fenced after it", 0, 0, http.MethodDelete, configMap, true},
		{"the acquisition: the Lease created", 0, http.StatusCreated, http.MethodPost, leases, false},
		{"a write after it", 0, 0, http.MethodPatch, configMap, false},
		{"a write past the window", 11 * time.Second, 0, http.MethodPatch, configMap, true},
		{"a renewal by update", 0, http.StatusOK, http.MethodPut, lease, false},
		{"a write right after", time.Second, 0, http.MethodPatch, configMap, false},
		{"a write near the end of the window", 8 * time.Second, 0, http.MethodPost, configMap, false},
		{"a write past the window (paused)", 2 * time.Second, 0, http.MethodPatch, configMap, true},
		{"a renewal", 0, http.StatusOK, http.MethodPut, lease, false},
		{"writes go again", 0, 0, http.MethodPatch, configMap, false},
	}
	for _, s := range steps {
		now = now.Add(s.advance)
		if s.leaseStatus != 0 {
			leaseStatus = s.leaseStatus
		}
		err := do(s.method, s.path)
		if refused := errors.Is(err, ErrFenced); refused != s.refused {
			t.Errorf("%s: error %v, want refused %v", s.name, err, s.refused)
		}
	}
}
