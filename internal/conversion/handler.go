package conversion

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/stencil-operator/stencil/render"
)

// Path is where the webhook server answers conversion reviews.
const Path = "/convert"

// maxReview bounds a review's body: the API server sends one object, or a
// list's worth.
const maxReview = 64 << 20

var conversions = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "stencil_conversions_total",
	Help: "Objects the conversion webhook converted, by kind, versions and result (success or failure).",
}, []string{"kind", "from", "to", "result"})

func init() { metrics.Registry.MustRegister(conversions) }

// Handler answers the API server's ConversionReviews.
type Handler struct {
	// Kind returns the kind of a group and kind, nil when stencil has
	// none: the kinds as they are now (templates reload).
	Kind func(schema.GroupKind) *render.Kind
	Log  logr.Logger
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST a ConversionReview", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxReview))
	if err != nil {
		code := http.StatusBadRequest
		if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
			code = http.StatusRequestEntityTooLarge
		}
		http.Error(w, "reading the review: "+err.Error(), code)
		return
	}
	review := apiextensionsv1.ConversionReview{}
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(w, fmt.Sprintf("not a ConversionReview with a request: %v", err), http.StatusBadRequest)
		return
	}
	review.Response = h.Convert(review.Request)
	review.Request = nil
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(review); err != nil {
		h.Log.Error(err, "Writing a conversion response")
	}
}

// Convert converts every object of a request, or fails the whole request
// with the first object that does not convert.
func (h *Handler) Convert(req *apiextensionsv1.ConversionRequest) *apiextensionsv1.ConversionResponse {
	resp := &apiextensionsv1.ConversionResponse{UID: req.UID}
	to, err := schema.ParseGroupVersion(req.DesiredAPIVersion)
	if err != nil {
		resp.Result = failure(fmt.Errorf("stencil: desiredAPIVersion %q: %w", req.DesiredAPIVersion, err))
		return resp
	}
	for _, raw := range req.Objects {
		out, err := h.convertOne(raw.Raw, to)
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
	result := "failure"
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("stencil: converting %s from %s to %s: panic: %v", what, gvk.Version, to.Version, p)
		}
		// Only the kind's own versions as labels: a request names any.
		from, into := known(k, gvk.Version), known(k, to.Version)
		conversions.WithLabelValues(gvk.Kind, from, into, result).Inc()
	}()
	converted, err := k.Convert(u.Object, to.Version)
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
	if slices.Contains(k.Versions(), v) {
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
