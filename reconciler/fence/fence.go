// Package fence keeps a leader that has lost its Lease without knowing it
// yet (a process paused past its lease: a long GC pause, a frozen VM,
// SIGSTOP) from writing to the API server. client-go's leader election
// gives no fencing: such a process goes on reconciling, with a stale
// cache, until its next renewal fails, and in that moment two processes act
// as leader.
//
// The fence sits in the client's transport. It notes when each successful
// renewal of this process's Lease (or its acquisition) was sent, and refuses
// every other write (POST, PUT, PATCH, DELETE) unless the last one was sent
// less than a window (the renew deadline) ago. A standby takes the Lease
// over only after it has seen it unrenewed for the whole lease duration,
// counted from when it saw the renewal, so no earlier than that renewal's
// sending plus the lease duration. A write let through carries a deadline,
// on the client and as the API server's timeout parameter, that ends a
// margin before then: a request that waits in the API server's queues
// (API Priority and Fairness) or admission past it is dropped, not done.
// What is left is a pause that falls between the check and the sending of
// that very request, and the API server's own latency beyond the margin.
// A release of the Lease closes the fence at once.
package fence

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ErrFenced is the error of a write the fence refused.
var ErrFenced = errors.New("refused a write: this process has not renewed its leader Lease recently, so it may no longer be the leader")

// Fence guards the writes of one process's clients.
type Fence struct {
	namespace, name string // our Lease; any namespace when namespace is ""
	// window: writes are let through this long after a renewal was sent.
	window time.Duration
	// deadline: a write let through must be done, on the API server's side,
	// this long after that renewal was sent (before a standby can take over).
	deadline time.Duration
	now      func() time.Time
	// renewed is when the last successful renewal of our Lease was sent;
	// nil before the first and after a release.
	renewed atomic.Pointer[time.Time]
}

// New is a fence for the Lease namespace/name, letting writes through for
// window after each renewal was sent, each to be done by deadline after it.
// deadline must be shorter than the lease duration, by a margin for the
// API server's own latency.
func New(namespace, name string, window, deadline time.Duration) *Fence {
	return &Fence{namespace: namespace, name: name, window: window, deadline: deadline, now: time.Now}
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
	if !writes(req.Method) || exempt(req.URL.Path) {
		return t.next.RoundTrip(req)
	}
	if ours, holder := f.leaseWrite(req); ours {
		return f.writeLease(t.next, req, holder)
	}
	left, err := f.check()
	if err != nil {
		refused.Inc()
		return nil, err
	}
	return bounded(t.next, req, left)
}

// writeLease sends a write of our Lease. A renewal (or acquisition) that
// succeeds opens the window from when it was sent; a release (no holder,
// or a delete) closes it before it is sent: a process that lets its Lease
// go is no longer the leader, whatever else it still has running.
func (f *Fence) writeLease(next http.RoundTripper, req *http.Request, holder string) (*http.Response, error) {
	if holder == "" {
		f.renewed.Store(nil)
		return next.RoundTrip(req)
	}
	sent := f.now()
	resp, err := next.RoundTrip(req)
	if err == nil && resp.StatusCode < http.StatusMultipleChoices {
		f.renewed.Store(&sent)
	}
	return resp, err
}

// check says whether a write may go now and, if so, how long it has to be
// done in. The age of the last renewal is measured on both clocks: the
// monotonic one does not advance while the machine is suspended, the wall
// clock does.
func (f *Fence) check() (time.Duration, error) {
	renewed := f.renewed.Load()
	if renewed == nil {
		return 0, fmt.Errorf("%w (it does not hold it)", ErrFenced)
	}
	now := f.now()
	age := max(now.Sub(*renewed), now.Round(0).Sub(renewed.Round(0)))
	if age >= f.window || age >= f.deadline {
		return 0, fmt.Errorf("%w (last renewal sent %s ago; the window is %s)", ErrFenced, age.Round(time.Millisecond), f.window)
	}
	return f.deadline - age, nil
}

// Open says whether a write may go now: nil, or an error wrapping
// ErrFenced. A reconcile asks before it starts writing, so that it does not
// begin what the fence would stop halfway.
func (f *Fence) Open() error {
	_, err := f.check()
	return err
}

// bounded sends req with a deadline left from now, on both sides: the
// client gives up waiting, and the API server (its timeout parameter) drops
// the request if it is still queued (API Priority and Fairness) or in
// admission by then, so that it cannot be done after a standby took over.
func bounded(next http.RoundTripper, req *http.Request, left time.Duration) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(req.Context(), left)
	out := req.Clone(ctx)
	query := out.URL.Query()
	if current, err := time.ParseDuration(query.Get("timeout")); err != nil || current > left {
		query.Set("timeout", left.Truncate(time.Millisecond).String())
		out.URL.RawQuery = query.Encode()
	}
	resp, err := next.RoundTrip(out)
	if err != nil {
		cancel()
		return resp, err
	}
	resp.Body = cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelOnClose ends a request's context when its response is read.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error {
	defer c.cancel()
	return c.ReadCloser.Close()
}

// leaseWrite reports whether req writes our Lease and, if so, the holder
// it writes ("" for a release or a delete). A Lease whose body cannot be
// read counts as a release: the fence closes rather than opens on doubt.
func (f *Fence) leaseWrite(req *http.Request) (ours bool, holder string) {
	path := req.URL.Path
	if !strings.HasPrefix(path, "/apis/coordination.k8s.io/") {
		return false, ""
	}
	collection := "/leases"
	if f.namespace != "" {
		collection = "/namespaces/" + f.namespace + "/leases"
	}
	switch {
	case strings.HasSuffix(path, collection+"/"+f.name):
		if req.Method == http.MethodDelete {
			return true, ""
		}
	case req.Method == http.MethodPost && strings.HasSuffix(path, collection):
	default:
		return false, ""
	}
	lease := readLease(req)
	if lease == nil {
		// A POST we cannot read is not known to be ours; a PUT to our
		// Lease's path is, and closes the fence.
		return req.Method != http.MethodPost, ""
	}
	if lease.Name != f.name {
		return false, ""
	}
	if lease.Spec.HolderIdentity == nil {
		return true, ""
	}
	return true, *lease.Spec.HolderIdentity
}

// readLease decodes the Lease in req's body: client-go sends it as
// protobuf or JSON, and the universal deserializer reads both.
func readLease(req *http.Request) *coordinationv1.Lease {
	if req.GetBody == nil {
		return nil
	}
	body, err := req.GetBody()
	if err != nil {
		return nil
	}
	defer func() { _ = body.Close() }()
	data, err := io.ReadAll(body)
	if err != nil {
		return nil
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		return nil
	}
	lease, _ := obj.(*coordinationv1.Lease)
	return lease
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

// retry is how soon a reconcile whose write the fence refused is
// tried again: the leader election's retry period.
const retry = 2 * time.Second

// Requeue ends a reconcile whose write the fence refused: this process may
// no longer be the leader. That is no failure of the resource: its status
// says nothing (it could not be written anyway), no error is counted and no
// backoff grows; the reconcile is tried again when the Lease may be renewed.
func Requeue(ctx context.Context, err error) (reconcile.Result, error) {
	ctrl.LoggerFrom(ctx).Info("Not written: this process has not renewed its leader Lease recently; trying again", "error", err.Error())
	return reconcile.Result{RequeueAfter: retry}, nil
}
