package handwritten

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	operatorv1 "github.com/stencil-operator/stencil/api/operator/v1"
)

// Variant is how the operator writes the objects.
type Variant string

const (
	// VariantApply server-side-applies typed apply configurations.
	VariantApply Variant = "apply"
	// VariantGetUpdate gets each object and creates or updates it.
	VariantGetUpdate Variant = "get-update"
)

// Options configure the operator. The zero values of Workers, QPS and Burst
// take stencil's defaults.
type Options struct {
	Variant Variant
	// Namespace limits the operator to one namespace ("": all).
	Namespace string
	// MetricsAddr is where /metrics is served ("0": nowhere); PprofAddr
	// where /debug/pprof is ("": nowhere).
	MetricsAddr, PprofAddr string
	// FieldManager of every write (default "myweb-operator").
	FieldManager string
	Workers      int
	QPS          float32
	Burst        int
	// SkipNameValidation lets a test run several such managers in one
	// process.
	SkipNameValidation bool
}

// NewManager builds the operator's manager: its cache, its client and the
// MyWeb controller, named "myweb" as stencil's is.
func NewManager(cfg *rest.Config, opts Options) (manager.Manager, error) {
	if opts.Variant != VariantApply && opts.Variant != VariantGetUpdate {
		return nil, fmt.Errorf("variant %q: want %q or %q", opts.Variant, VariantApply, VariantGetUpdate)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = or(opts.QPS, 500), or(opts.Burst, 1000)
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), operatorv1.AddToScheme(scheme)); err != nil {
		return nil, err
	}
	cacheOpts := cache.Options{}
	if opts.Namespace != "" {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{opts.Namespace: {}}
	}
	if opts.Variant == VariantApply {
		// Applies need no managedFields from the cache: leave them out, as
		// controller-runtime's docs advise.
		cacheOpts.DefaultTransform = cache.TransformStripManagedFields()
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  cacheOpts,
		Metrics:                metricsserver.Options{BindAddress: or(opts.MetricsAddr, "0")},
		HealthProbeBindAddress: "0",
		PprofBindAddress:       opts.PprofAddr,
	})
	if err != nil {
		return nil, err
	}
	r := &reconciler{client: mgr.GetClient(), reader: mgr.GetAPIReader(), variant: opts.Variant, fieldManager: or(opts.FieldManager, "myweb-operator")}
	err = ctrl.NewControllerManagedBy(mgr).
		Named("myweb").
		For(&operatorv1.MyWeb{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&corev1.ConfigMap{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: or(opts.Workers, 8), SkipNameValidation: &opts.SkipNameValidation}).
		Complete(r)
	return mgr, err
}

func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// reconciler reconciles one MyWeb: its objects, then its status.
type reconciler struct {
	client       client.Client
	reader       client.Reader // uncached: does an object the cache lacks exist?
	variant      Variant
	fieldManager string
}

func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	web := &operatorv1.MyWeb{}
	if err := r.client.Get(ctx, req.NamespacedName, web); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !web.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // the garbage collector deletes the owned objects
	}
	var writeErr error
	if r.variant == VariantApply {
		writeErr = r.applyObjects(ctx, web)
	} else {
		writeErr = r.getUpdateObjects(ctx, web)
	}
	if apierrors.IsAlreadyExists(writeErr) || apierrors.IsConflict(writeErr) {
		// The cache is behind a write of ours: look again in a moment,
		// once it has caught up; not a failure to report, nor one to back
		// off from exponentially (at N = 5,000 the cache lags for minutes,
		// and the backoff of an error return outgrew the run).
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	d := &appsv1.Deployment{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: web.Namespace, Name: web.Name}, d); apierrors.IsNotFound(err) {
		d = nil // not in the cache yet: its event brings the MyWeb back
	} else if err != nil {
		return ctrl.Result{}, errors.Join(writeErr, err)
	}
	if err := r.writeStatus(ctx, web, d, writeErr); err != nil {
		return ctrl.Result{}, errors.Join(writeErr, err)
	}
	return ctrl.Result{}, writeErr
}
