// Package fence keeps a leader that has lost its Lease without knowing it
// yet (a process paused past its lease: a long GC pause, a frozen VM,
// SIGSTOP) from writing to the API server. client-go's leader election
// gives no fencing: such a process goes on reconciling, with a stale
// cache, until its next renewal fails, and in that moment two processes act
// as leader.
//
// The fence sits in the client's transport. It notes when each successful
// write of this process's Lease (an acquisition or a renewal) was sent, and
// refuses every other write (POST, PUT, PATCH, DELETE) unless the last one
// was sent less than a window ago. A standby takes the Lease over only after
// it has seen it unrenewed for the whole lease duration, so with a window
// shorter than that (the renew deadline), a write the fence lets through
// cannot come after a takeover, but for a pause that falls between the check
// and the sending of that very request.
package fence

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// ErrFenced is the error of a write the fence refused.
var ErrFenced = errors.New("refused a write: this process has not renewed its leader Lease recently, so it may no longer be the leader")

// Fence guards the writes of one process's clients.
type Fence struct {
	lease  string        // "/leases/<name>": the path suffix of our Lease
	window time.Duration // writes are allowed this long after a renewal was sent
	now    func() time.Time
	// renewed is when the last successful write of our Lease was sent
	// (monotonic); nil until the first.
	renewed atomic.Pointer[time.Time]
}

// New is a fence for the Lease named lease (in any namespace), letting
// writes through for window after each renewal.
func New(lease string, window time.Duration) *Fence {
	return &Fence{lease: "/leases/" + lease, window: window, now: time.Now}
}

// Wrap is a transport wrapper for rest.Config.Wrap.
func (f *Fence) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper{fence: f, next: rt}
}

type roundTripper struct {
	fence *Fence
	next  http.RoundTripper
}

func (t roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	f := t.fence
	switch {
	case !writes(req.Method):
		return t.next.RoundTrip(req)
	case f.isLease(req):
		sent := f.now()
		resp, err := t.next.RoundTrip(req)
		if err == nil && resp.StatusCode < http.StatusMultipleChoices && req.Method != http.MethodDelete {
			f.renewed.Store(&sent)
		}
		return resp, err
	case exempt(req.URL.Path):
		return t.next.RoundTrip(req)
	}
	if err := f.check(); err != nil {
		refused.Inc()
		return nil, err
	}
	return t.next.RoundTrip(req)
}

// check says whether a write may go now.
func (f *Fence) check() error {
	renewed := f.renewed.Load()
	if renewed == nil {
		return fmt.Errorf("%w (it never held it)", ErrFenced)
	}
	if age := f.now().Sub(*renewed); age >= f.window {
		return fmt.Errorf("%w (last renewal sent %s ago; the window is %s)", ErrFenced, age.Round(time.Millisecond), f.window)
	}
	return nil
}

// isLease reports whether req writes our Lease: a PUT (or DELETE) of it, or
// the POST that creates it, whose name is in its body.
func (f *Fence) isLease(req *http.Request) bool {
	path := req.URL.Path
	if !strings.HasPrefix(path, "/apis/coordination.k8s.io/") {
		return false
	}
	if strings.HasSuffix(path, f.lease) {
		return true
	}
	if req.Method != http.MethodPost || !strings.HasSuffix(path, "/leases") || req.GetBody == nil {
		return false
	}
	body, err := req.GetBody()
	if err != nil {
		return false
	}
	defer func() { _ = body.Close() }()
	data, err := io.ReadAll(body)
	if err != nil {
		return false
	}
	// client-go sends Leases as protobuf or JSON; the universal
	// deserializer reads both.
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(data, nil, nil)
	lease, ok := obj.(*coordinationv1.Lease)
	return err == nil && ok && "/leases/"+lease.Name == f.lease
}

func writes(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// exempt are the POSTs that change nothing: the reviews that authenticate
// and authorize scrapers of the metrics endpoint.
func exempt(path string) bool {
	return strings.HasPrefix(path, "/apis/authentication.k8s.io/") || strings.HasPrefix(path, "/apis/authorization.k8s.io/")
}

var refused = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "stencil_fenced_writes_total",
	Help: "Writes refused because this process had not renewed its leader Lease within the fence window (it may no longer be the leader).",
})

func init() {
	metrics.Registry.MustRegister(refused)
}
