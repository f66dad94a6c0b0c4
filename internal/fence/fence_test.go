package fence

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
)

const protobuf = runtime.ContentTypeProtobuf

// encode is a Lease named name as client-go sends it in mediaType.
func encode(t *testing.T, name, mediaType string) []byte {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), mediaType)
	if !ok {
		t.Fatalf("no serializer for %s", mediaType)
	}
	encoder := scheme.Codecs.EncoderForVersion(info.Serializer, coordinationv1.SchemeGroupVersion)
	var buf bytes.Buffer
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "stencil-system"}}
	if err := encoder.Encode(lease, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

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
	do := func(method, path string, body []byte) error {
		req, err := http.NewRequest(method, server.URL+path, bytes.NewReader(body))
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
		body         []byte
		refused      bool
	}{
		{"a write before the Lease is ever held", 0, 0, http.MethodPatch, configMap, nil, true},
		{"a read is never fenced", 0, 0, http.MethodGet, configMap, nil, false},
		{"a scraper's review is never fenced", 0, 0, http.MethodPost, review, nil, false},
		{"another Lease is not ours", 0, 0, http.MethodPut, otherLease, nil, true},
		{"a failed acquisition", 0, http.StatusConflict, http.MethodPut, lease, nil, false},
		{"still fenced after it", 0, 0, http.MethodDelete, configMap, nil, true},
		{"another Lease created (protobuf)", 0, http.StatusCreated, http.MethodPost, leases, encode(t, "someone-else", protobuf), true},
		{"still fenced after it", 0, 0, http.MethodPatch, configMap, nil, true},
		{"our Lease created (JSON)", 0, http.StatusCreated, http.MethodPost, leases, encode(t, "stencil.stencil.dev", runtime.ContentTypeJSON), false},
		{"a write after it", 0, 0, http.MethodPatch, configMap, nil, false},
		{"a write past the window", 11 * time.Second, 0, http.MethodPatch, configMap, nil, true},
		{"our Lease created (protobuf, as client-go sends it)", 0, http.StatusCreated, http.MethodPost, leases, encode(t, "stencil.stencil.dev", protobuf), false},
		{"a write after it", 0, 0, http.MethodPatch, configMap, nil, false},
		{"a write past the window", 11 * time.Second, 0, http.MethodPatch, configMap, nil, true},
		{"a renewal by update", 0, http.StatusOK, http.MethodPut, lease, nil, false},
		{"a write right after", time.Second, 0, http.MethodPatch, configMap, nil, false},
		{"a write near the end of the window", 8 * time.Second, 0, http.MethodPost, configMap, nil, false},
		{"a write past the window (paused)", 2 * time.Second, 0, http.MethodPatch, configMap, nil, true},
		{"a renewal", 0, http.StatusOK, http.MethodPut, lease, nil, false},
		{"writes go again", 0, 0, http.MethodPatch, configMap, nil, false},
	}
	for _, s := range steps {
		now = now.Add(s.advance)
		if s.leaseStatus != 0 {
			leaseStatus = s.leaseStatus
		}
		err := do(s.method, s.path, s.body)
		if refused := errors.Is(err, ErrFenced); refused != s.refused {
			t.Errorf("%s: error %v, want refused %v", s.name, err, s.refused)
		}
	}
}
