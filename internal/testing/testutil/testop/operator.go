// Package testop starts stencil's controllers in a test's process, on a
// local control plane, as the operator binary sets them up.
package testop

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/stencil-operator/stencil/reconciler"
	"github.com/stencil-operator/stencil/reconciler/decorator"
	"github.com/stencil-operator/stencil/reconciler/shard"
	"github.com/stencil-operator/stencil/render"
)

// StartOperator runs stencil's manager in this process for kinds, until ctx
// ends, with wrap (if not nil) around its HTTP transport. Set
// STENCIL_TEST_DEBUG=1 to see its logs.
func StartOperator(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, kinds []*render.Kind, wrap func(http.RoundTripper) http.RoundTripper) error {
	_, err := start(ctx, cfg, scheme, kinds, decorators{}, nil, false, wrap)
	return err
}

// RunOperator is StartOperator that also tells when the manager stops on
// its own, with what error: the channel receives what its Start returned.
func RunOperator(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, kinds []*render.Kind, wrap func(http.RoundTripper) http.RoundTripper) (<-chan error, error) {
	return start(ctx, cfg, scheme, kinds, decorators{}, nil, false, wrap)
}

// StartShard is StartOperator as one shard of several (see
// shard.Shards).
func StartShard(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, kinds []*render.Kind, shards shard.Shards, wrap func(http.RoundTripper) http.RoundTripper) error {
	_, err := RunShard(ctx, cfg, scheme, kinds, shards, wrap)
	return err
}

// RunShard is StartShard that also tells when the manager stops, with
// what error: the channel receives what its Start returned.
func RunShard(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, kinds []*render.Kind, shards shard.Shards, wrap func(http.RoundTripper) http.RoundTripper) (<-chan error, error) {
	claim := os.Getenv("STENCIL_TEST_NO_CLAIMS") == "" // set, to see the test fail without claims
	return start(ctx, cfg, scheme, kinds, decorators{}, &shards, claim, wrap)
}

// StartWithDecorators is StartOperator with decorators too, each enabled
// on every object of its type.
func StartWithDecorators(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, kinds []*render.Kind, decs []*render.Decorator, wrap func(http.RoundTripper) http.RoundTripper) error {
	enabled := map[string]decorator.Scope{}
	for _, d := range decs {
		enabled[d.Name()] = decorator.Scope{}
	}
	_, err := start(ctx, cfg, scheme, kinds, decorators{loaded: decs, enabled: enabled}, nil, false, wrap)
	return err
}

// StartDecorators runs decorators only, enabled (each in its scope),
// disabled or off as enabled and disabled say, as `stencil --decorators
// --disable-decorator` does.
func StartDecorators(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, decs []*render.Decorator, enabled map[string]decorator.Scope, disabled []string, wrap func(http.RoundTripper) http.RoundTripper) error {
	_, err := start(ctx, cfg, scheme, nil, decorators{loaded: decs, enabled: enabled, disabled: disabled}, nil, false, wrap)
	return err
}

// decorators are the decorators a manager loads, and which of them run.
type decorators struct {
	loaded   []*render.Decorator
	enabled  map[string]decorator.Scope
	disabled []string
}

// start runs a manager for kinds and decorators, as one shard when shards
// is set (claims only when claim). The channel receives what the
// manager's Start returns.
func start(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, kinds []*render.Kind, decs decorators, shards *shard.Shards, claim bool, wrap func(http.RoundTripper) http.RoundTripper) (<-chan error, error) {
	if os.Getenv("STENCIL_TEST_DEBUG") != "" {
		ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true)))
	} else {
		ctrl.SetLogger(logr.Discard())
	}
	sel := labels.Everything()
	if shards != nil {
		var err error
		if sel, err = shards.Selector(); err != nil {
			return nil, err
		}
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 500, 1000
	cfg.WrapTransport = wrap
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme,
		Cache:   reconciler.ShardCacheOptions(kinds, sel),
		Client:  reconciler.ClientOptions(),
		Metrics: metricsserver.Options{BindAddress: "0"},
		// As the operator: a kind whose CRD is missing does not stop the others.
		NewCache: reconciler.NewCache,
	})
	if err != nil {
		return nil, err
	}
	opts := reconciler.Options{MaxConcurrentReconciles: 4, SkipNameValidation: true}
	if claim {
		opts.Shards = shards
	}
	if err := reconciler.Setup(mgr, kinds, opts); err != nil {
		return nil, err
	}
	decOpts := decorator.Options{MaxConcurrentReconciles: 4, SkipNameValidation: true, Enabled: decs.enabled, Disabled: decs.disabled}
	if err := decorator.Setup(mgr, decs.loaded, decOpts); err != nil {
		return nil, err
	}
	stopped := make(chan error, 1)
	go func() {
		err := mgr.Start(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
		stopped <- err
	}()
	return stopped, nil
}
