package conversion

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/render"
)

// Path is where the webhook server answers conversion reviews.
const Path = "/convert"

// Bounds of the webhook: what one review may cost the operator, whoever
// sends it.
const (
	// maxReview bounds a review's body: the API server sends one object
	// (its requests are 3 MiB at most), or a page of a list (500 objects
	// at most, for informers and kubectl).
	maxReview = 32 << 20
	// maxReviews is how many reviews are read and converted at once; more
	// wait for one of them, up to their deadline.
	maxReviews = 2
	// reviewDeadline is how long a review may take: the API server waits
	// 30 s for a conversion webhook. Objects left when it passes are
	// answered as failed (see [Handler.Convert]).
	reviewDeadline = 20 * time.Second
)

var (
	conversions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stencil_conversions_total",
		Help: "Objects the conversion webhook converted, by kind, versions and result (success or failure).",
	}, []string{"kind", "from", "to", "result"})
	keptIgnored = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stencil_conversion_kept_fields_ignored_total",
		Help: "Annotations of kept fields (stencil.dev/fields-of-<version>) that a conversion did not restore, by kind and reason (TooLarge, Malformed, NotSigned: a client wrote it, BreaksSchema).",
	}, []string{"kind", "reason"})
)

func init() { metrics.Registry.MustRegister(conversions, keptIgnored) }

// Handler answers the API server's ConversionReviews.
type Handler struct {
	// Kind returns the kind of a group and kind, nil when stencil has
	// none: the kinds as they are now (templates reload).
	Kind func(schema.GroupKind) *render.Kind
	// Key returns the key that signs the fields conversions keep in
	// annotations; nil: they are not signed (a local run).
	Key func() []byte
	// Schema returns the schemas of a kind's versions, nil when unknown.
	Schema func(schema.GroupKind) render.VersionSchema
	// Storage returns a kind's storage version, "" when unknown: an object
	// converted from it is a read of what is stored (see
	// [Handler.Convert]).
	Storage func(schema.GroupKind) string
	Log     logr.Logger

	slots chan struct{}
	once  sync.Once
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST a ConversionReview", http.StatusMethodNotAllowed)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), reviewDeadline)
	defer cancel()
	// The body is read before a slot is taken, within the deadline: a
	// client that sends slowly holds no slot.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(reviewDeadline))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxReview))
	if err != nil {
		code := http.StatusBadRequest
		if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
			code = http.StatusRequestEntityTooLarge
		}
		http.Error(w, "reading the review: "+err.Error(), code)
		return
	}
	h.once.Do(func() { h.slots = make(chan struct{}, maxReviews) })
	select {
	case h.slots <- struct{}{}:
		defer func() { <-h.slots }()
	case <-ctx.Done():
		http.Error(w, "stencil is converting as many reviews as it may at once", http.StatusTooManyRequests)
		return
	}
	review := apiextensionsv1.ConversionReview{}
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(w, fmt.Sprintf("not a ConversionReview with a request: %v", err), http.StatusBadRequest)
		return
	}
	review.Response = h.Convert(ctx, review.Request)
	review.Request = nil
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(review); err != nil {
		h.Log.Error(err, "Writing a conversion response")
	}
}

// Convert converts every object of a request. An object whose conversion
// template fails (or runs past its limits) fails the request when it is
// being written; when it is being read (converted from the storage
// version, or one of a list's objects) it is answered as a placeholder
// (see [placeholder]): the API server decodes each stored object of a list
// through the webhook, and one that failed would fail every list of its
// version in every namespace. Any other failure (the review's deadline, a
// kind stencil does not have) fails the request: it may not repeat, and a
// placeholder would stand for a resource that converts.
func (h *Handler) Convert(ctx context.Context, req *apiextensionsv1.ConversionRequest) *apiextensionsv1.ConversionResponse {
	resp := &apiextensionsv1.ConversionResponse{UID: req.UID}
	to, err := schema.ParseGroupVersion(req.DesiredAPIVersion)
	if err != nil {
		resp.Result = failure(fmt.Errorf("stencil: desiredAPIVersion %q: %w", req.DesiredAPIVersion, err))
		return resp
	}
	for _, raw := range req.Objects {
		err := ctx.Err()
		var out []byte
		if err == nil {
			out, err = h.convertOne(raw.Raw, to)
		} else {
			err = fmt.Errorf("stencil: the review's deadline (%s) passed before this object converted", reviewDeadline)
		}
		if repeats(err) && (len(req.Objects) > 1 || h.readsStored(raw.Raw, to)) {
			h.Log.Error(err, "Conversion failed; the object is read as a placeholder")
			out, err = placeholder(raw.Raw, to, err)
		}
		if err != nil {
			h.Log.Error(err, "Conversion failed")
			resp.ConvertedObjects = nil
			resp.Result = failure(err)
			return resp
		}
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: out})
	}
	resp.Result = metav1.Status{Status: metav1.StatusSuccess}
	return resp
}

// repeats: err is a conversion template's failure that the same object
// meets again, not its time running out (a loaded machine).
func repeats(err error) bool {
	if _, ok := errors.AsType[*render.ConversionError](err); !ok {
		return false
	}
	limit, ok := errors.AsType[*render.LimitError](err)
	return !ok || limit.Limit != "render time"
}

// readsStored: raw is at its kind's storage version and converts to
// another: what is stored, being read (a write converts to the storage
// version).
func (h *Handler) readsStored(raw []byte, to schema.GroupVersion) bool {
	if h.Storage == nil {
		return false
	}
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if json.Unmarshal(raw, &head) != nil {
		return false
	}
	gv, err := schema.ParseGroupVersion(head.APIVersion)
	if err != nil || gv.Group != to.Group {
		return false
	}
	storage := h.Storage(schema.GroupKind{Group: gv.Group, Kind: head.Kind})
	return storage != "" && gv.Version == storage && to.Version != storage
}

// placeholder is what a list holds of an object that did not convert: its
// metadata at the version to, with neither spec nor status, annotated
// stencil.dev/conversion-failed with why. stencil does not reconcile it
// (nor, as it reads no spec, change any of its objects); its admission
// policy refuses it written back.
func placeholder(raw []byte, to schema.GroupVersion, why error) ([]byte, error) {
	u := &unstructured.Unstructured{}
	if err := utiljson.Unmarshal(raw, &u.Object); err != nil {
		return nil, fmt.Errorf("stencil: an object of the review is not JSON: %w", err)
	}
	out := &unstructured.Unstructured{Object: map[string]any{"metadata": u.Object["metadata"]}}
	out.SetAPIVersion(to.String())
	out.SetKind(u.GetKind())
	ann := out.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[v1alpha1.AnnotationConversionFailed] = why.Error()
	out.SetAnnotations(ann)
	return json.Marshal(out.Object)
}

func failure(err error) metav1.Status {
	return metav1.Status{Status: metav1.StatusFailure, Message: err.Error(), Reason: metav1.StatusReasonInvalid}
}

// convertOne converts one object to the version to; a panic in a template
// function is an error, never the operator's end.
func (h *Handler) convertOne(raw []byte, to schema.GroupVersion) (out []byte, err error) {
	u := &unstructured.Unstructured{}
	if err := utiljson.Unmarshal(raw, &u.Object); err != nil { // whole numbers as int64, none rounded
		return nil, fmt.Errorf("stencil: an object of the review is not JSON: %w", err)
	}
	gvk := u.GroupVersionKind()
	what := fmt.Sprintf("%s %s", gvk.Kind, objectName(u))
	k := h.Kind(gvk.GroupKind())
	if k == nil {
		return nil, fmt.Errorf("stencil: converting %s: stencil has no kind %s", what, gvk.GroupKind())
	}
	if to.Group != gvk.Group {
		return nil, fmt.Errorf("stencil: converting %s to %s: another group", what, to)
	}
	if _, ok := u.GetAnnotations()[v1alpha1.AnnotationConversionFailed]; ok {
		return nil, fmt.Errorf("stencil: %s is a list's placeholder of a resource that did not convert (annotation %s): it has no spec to write; read the resource at its stored version and write that", what, v1alpha1.AnnotationConversionFailed)
	}
	result := "failure"
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("stencil: converting %s from %s to %s: panic: %v", what, gvk.Version, to.Version, p)
		}
		// Only the kind's own versions as labels: a request names any.
		from, into := known(k, gvk.Version), known(k, to.Version)
		conversions.WithLabelValues(gvk.Kind, from, into, result).Inc()
	}()
	opts := render.ConvertOptions{Ignored: func(i render.IgnoredKept) {
		keptIgnored.WithLabelValues(gvk.Kind, i.Reason).Inc()
		h.Log.Info("Converted without the fields an annotation keeps", "object", what, "annotation", i.Annotation, "reason", i.Reason, "message", i.Message)
	}}
	if h.Key != nil {
		opts.Key = h.Key()
	}
	if h.Schema != nil {
		opts.Schema = h.Schema(gvk.GroupKind())
	}
	converted, err := k.Conversion().ConvertWith(u.Object, to.Version, opts)
	if err != nil {
		return nil, fmt.Errorf("stencil: %s: %w", what, err)
	}
	if out, err = json.Marshal(converted); err != nil {
		return nil, fmt.Errorf("stencil: %s: %w", what, err)
	}
	result = "success"
	return out, nil
}

// known is v when it is one of k's versions, else "unknown".
func known(k *render.Kind, v string) string {
	if slices.Contains(k.Conversion().Versions(), v) {
		return v
	}
	return "unknown"
}

func objectName(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return u.GetName()
	}
	return u.GetNamespace() + "/" + u.GetName()
}
