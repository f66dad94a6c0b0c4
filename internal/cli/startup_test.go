package cli

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// TestStartupChecks: /readyz fails until the caches are filled (but when
// the webhook is reached through a Service), /healthz once the bound has
// passed without them.
func TestStartupChecks(t *testing.T) {
	for _, tt := range []struct {
		name string
		// bound is --startup-timeout; elapsed, the time since the start.
		bound, elapsed time.Duration
		// filled: the manager has filled its caches.
		filled bool
		// behindService: the CRDs reach the conversion webhook through a
		// Service.
		behindService bool
		// wantReady and wantLive: the checks pass.
		wantReady, wantLive bool
	}{
		{name: "starting", bound: time.Minute, elapsed: time.Second, wantLive: true},
		{name: "filled", bound: time.Minute, elapsed: time.Hour, filled: true, wantReady: true, wantLive: true},
		{name: "not filled within the bound", bound: time.Minute, elapsed: 61 * time.Second},
		{name: "no bound", elapsed: time.Hour, wantLive: true},
		{name: "webhook behind a Service, starting", bound: time.Minute, elapsed: time.Second, behindService: true, wantReady: true, wantLive: true},
		{name: "webhook behind a Service, not filled within the bound", bound: time.Minute, elapsed: time.Hour, behindService: true, wantReady: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newStartup(tt.bound, tt.behindService, logr.Discard())
			s.now = func() time.Time { return s.began.Add(tt.elapsed) }
			if tt.filled {
				if err := s.Start(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.ready(nil); (err == nil) != tt.wantReady {
				t.Errorf("readyz: %v, want passing %v", err, tt.wantReady)
			}
			if err := s.live(nil); (err == nil) != tt.wantLive {
				t.Errorf("healthz: %v, want passing %v", err, tt.wantLive)
			}
		})
	}
}

// TestStartupBoundsCacheFill runs a real manager whose cache cannot fill
// (its user may not list the ConfigMaps it caches): controller-runtime
// waits for it before anything else, with no bound; run gives up at the
// bound, or returns when stopped, and the probes say it has not started.
// With the list allowed, the caches fill and the probes pass.
func TestStartupBoundsCacheFill(t *testing.T) {
	cluster := startAPIServer(t)
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(cluster.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		// user runs the manager: "" the cluster's admin, else a user with
		// no RBAC (lists forbidden).
		user string
		// bound is --startup-timeout.
		bound time.Duration
		// stopAfter: the manager's context ends this long after the start
		// (0: when the caches are filled, or never when they are not).
		stopAfter time.Duration
		// wantErr: run's error; wantFilled: the caches were filled.
		wantErr    error
		wantFilled bool
	}{
		{name: "lists allowed", bound: time.Minute, wantFilled: true},
		{name: "lists forbidden: gives up at the bound", user: "no-rights-a", bound: 2 * time.Second, wantErr: errNotFilled},
		{name: "lists forbidden: stopped before the bound", user: "no-rights-b", bound: time.Minute, stopAfter: time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := cluster.Config
			if tt.user != "" {
				if cfg, err = cluster.UserConfig(tt.user); err != nil {
					t.Fatal(err)
				}
			}
			mgr, stopped := cachingManager(t, cfg, scheme)
			s := newStartup(tt.bound, false, logr.Discard())
			if err := addStartupChecks(mgr, s); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			switch {
			case tt.stopAfter > 0:
				time.AfterFunc(tt.stopAfter, cancel)
			case tt.wantFilled:
				go func() { <-s.done; cancel() }()
			}
			began := time.Now()
			err := s.run(ctx, func(ctx context.Context) error { defer close(stopped); return mgr.Start(ctx) })
			took := time.Since(began)
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("run: %v, want %v", err, tt.wantErr)
			}
			if limit := max(tt.bound, tt.stopAfter) + stopGrace + 5*time.Second; took > limit && tt.user != "" {
				t.Errorf("run returned after %s, want within %s", took, limit)
			}
			if s.filled() != tt.wantFilled {
				t.Errorf("caches filled %v, want %v", s.filled(), tt.wantFilled)
			}
			if err := s.ready(nil); (err == nil) != tt.wantFilled {
				t.Errorf("readyz: %v, want passing %v", err, tt.wantFilled)
			}
			if tt.user == "" {
				return
			}
			// Let the list through, so that the manager, stuck until it
			// fills its caches, can stop (controller-runtime's Start does
			// not return before). cluster-admin, as "view" is aggregated
			// by kube-controller-manager, which this cluster does not run.
			cancel()
			binding := &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: tt.user},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
				Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: tt.user}},
			}
			if err := admin.Create(t.Context(), binding); err != nil {
				t.Fatal(err)
			}
			select {
			case <-stopped:
			case <-time.After(time.Minute):
				t.Errorf("the manager did not stop within a minute of the list being allowed")
			}
		})
	}
}

// cachingManager is a manager of cfg whose cache has a ConfigMap informer
// before it starts, as the kinds' owned types have; stopped is for the
// caller to close when the manager's Start has returned.
func cachingManager(t *testing.T, cfg *rest.Config, scheme *runtime.Scheme) (ctrl.Manager, chan struct{}) {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mgr.GetCache().GetInformer(t.Context(), &corev1.ConfigMap{}, cache.BlockUntilSynced(false)); err != nil {
		t.Fatal(err)
	}
	return mgr, make(chan struct{})
}
