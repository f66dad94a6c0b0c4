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

const (
	protobuf = runtime.ContentTypeProtobuf
	json     = runtime.ContentTypeJSON
	ours     = "stencil.stencil.dev"
)

// encode is a Lease as client-go sends it in mediaType; holder "" is a
// release as client-go writes it, "-" one without a holder at all.
func encode(t *testing.T, namespace, name, holder, mediaType string) []byte {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), mediaType)
	if !ok {
		t.Fatalf("no serializer for %s", mediaType)
	}
	encoder := scheme.Codecs.EncoderForVersion(info.Serializer, coordinationv1.SchemeGroupVersion)
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	if holder != "-" {
		lease.Spec.HolderIdentity = &holder
	}
	var buf bytes.Buffer
	if err := encoder.Encode(lease, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// The fence lets writes through only within its window after a successful
// renewal of the Lease was sent, each with a deadline before a standby could
// take over; a release closes it; reads, other Leases and the reviews of
// scrapers are not its business.
func TestFence(t *testing.T) {
	leaseStatus, timeout := http.StatusOK, ""
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		timeout = r.URL.Query().Get("timeout")
		if strings.Contains(r.URL.Path, "/leases") {
			w.WriteHeader(leaseStatus)
		}
	}))
	defer server.Close()
	now := time.Unix(1000, 0)
	f := New("stencil-system", ours, 10*time.Second, 13*time.Second)
	f.now = func() time.Time { return now }
	client := &http.Client{Transport: f.Wrap(http.DefaultTransport)}
	const (
		base       = "/apis/coordination.k8s.io/v1/namespaces/stencil-system/leases"
		lease      = base + "/" + ours
		otherNS    = "/apis/coordination.k8s.io/v1/namespaces/elsewhere/leases/" + ours
		otherLease = base + "/someone-else"
		configMap  = "/api/v1/namespaces/ns/configmaps/cm"
		review     = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
	)
	renew := encode(t, "stencil-system", ours, "me", protobuf)
	steps := []struct {
		name         string
		advance      time.Duration
		leaseStatus  int
		method, path string
		body         []byte
		refused      bool
		timeout      string // the timeout parameter the server saw
	}{
		{"a write before the Lease is ever held", 0, 0, http.MethodPatch, configMap, nil, true, ""},
		{"a read is never fenced", 0, 0, http.MethodGet, configMap, nil, false, ""},
		{"a scraper's review is never fenced", 0, 0, http.MethodPost, review, nil, false, ""},
		{"another Lease is not ours: a write like any other", 0, 0, http.MethodPut, otherLease, encode(t, "stencil-system", "someone-else", "me", json), true, ""},
		{"our name in another namespace is not ours", 0, 0, http.MethodPut, otherNS, encode(t, "elsewhere", ours, "me", json), true, ""},
		{"a failed acquisition", 0, http.StatusConflict, http.MethodPut, lease, renew, false, ""},
		{"still fenced after it", 0, 0, http.MethodDelete, configMap, nil, true, ""},
		{"another Lease created (protobuf)", 0, http.StatusCreated, http.MethodPost, base, encode(t, "stencil-system", "someone-else", "me", protobuf), true, ""},
		{"still fenced after that", 0, 0, http.MethodPatch, configMap, nil, true, ""},
		{"our Lease created (JSON)", 0, http.StatusCreated, http.MethodPost, base, encode(t, "stencil-system", ours, "me", json), false, ""},
		{"a write right after: the whole deadline", 0, 0, http.MethodPatch, configMap, nil, false, "13s"},
		{"a write past the window", 11 * time.Second, 0, http.MethodPatch, configMap, nil, true, ""},
		{"our Lease created (protobuf, as client-go sends it)", 0, http.StatusCreated, http.MethodPost, base, encode(t, "stencil-system", ours, "me", protobuf), false, ""},
		{"a write after it", time.Second, 0, http.MethodPatch, configMap, nil, false, "12s"},
		{"a write near the end of the window: what is left", 8 * time.Second, 0, http.MethodPost, configMap, nil, false, "4s"},
		{"a write past the window (paused)", 2 * time.Second, 0, http.MethodPatch, configMap, nil, true, ""},
		{"a renewal by update", 0, http.StatusOK, http.MethodPut, lease, renew, false, ""},
		{"writes go again", 0, 0, http.MethodPatch, configMap, nil, false, "13s"},
		{"a release (as client-go writes it: holder \"\")", 0, http.StatusOK, http.MethodPut, lease, encode(t, "stencil-system", ours, "", protobuf), false, ""},
		{"closes the fence at once", 0, 0, http.MethodPatch, configMap, nil, true, ""},
		{"a renewal again", 0, http.StatusOK, http.MethodPut, lease, renew, false, ""},
		{"opens it", 0, 0, http.MethodPatch, configMap, nil, false, "13s"},
		{"a release that fails (no holder at all)", 0, http.StatusConflict, http.MethodPut, lease, encode(t, "stencil-system", ours, "-", json), false, ""},
		{"closes it all the same", 0, 0, http.MethodPatch, configMap, nil, true, ""},
		{"a renewal once more", 0, http.StatusOK, http.MethodPut, lease, renew, false, ""},
		{"a write of our Lease that cannot be read closes it", 0, http.StatusOK, http.MethodPut, lease, []byte("?"), false, ""},
		{"closed", 0, 0, http.MethodPatch, configMap, nil, true, ""},
	}
	for _, s := range steps {
		now = now.Add(s.advance)
		if s.leaseStatus != 0 {
			leaseStatus = s.leaseStatus
		}
		timeout = ""
		req, err := http.NewRequest(s.method, server.URL+s.path, bytes.NewReader(s.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		if refused := errors.Is(err, ErrFenced); refused != s.refused {
			t.Errorf("%s: error %v, want refused %v", s.name, err, s.refused)
		}
		if timeout != s.timeout {
			t.Errorf("%s: the server saw timeout %q, want %q", s.name, timeout, s.timeout)
		}
		if s.method != http.MethodGet && !strings.Contains(s.path, "leases") && s.path != review {
			if open := f.Open(); errors.Is(open, ErrFenced) != s.refused {
				t.Errorf("%s: Open() = %v, want refused %v as the write was", s.name, open, s.refused)
			}
		}
	}
}
