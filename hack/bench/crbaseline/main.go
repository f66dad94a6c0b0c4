// Command crbaseline is the memory floor of any controller-runtime operator,
// which `make bench` reports beside stencil's: a bare manager whose one
// controller watches MyWebs and does nothing with them. Once it has
// reconciled every MyWeb it was told of, it prints its peak RSS and the part
// of its RSS that is the mapped binary (see package peak), and exits.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	operatorv1 "github.com/stencil-operator/stencil/api/operator/v1"
	"github.com/stencil-operator/stencil/hack/bench/peak"
)

func main() {
	// controller-runtime registers --kubeconfig.
	n := flag.Int("n", 0, "MyWebs to reconcile before exiting.")
	flag.Parse()
	if err := run(*n); err != nil {
		fmt.Fprintln(os.Stderr, "crbaseline:", err)
		os.Exit(1)
	}
	if err := peak.Print(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "crbaseline: reading its memory:", err)
		os.Exit(1)
	}
}

func run(n int) error {
	if n < 1 {
		return errors.New("-n must be at least 1")
	}
	ctrl.SetLogger(logr.Discard())
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS, cfg.DisableCompression = -1, true // as stencil runs
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), operatorv1.AddToScheme(scheme)); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	ctx, done := context.WithCancel(context.Background())
	defer done()
	var mu sync.Mutex
	seen := map[types.NamespacedName]bool{}
	err = ctrl.NewControllerManagedBy(mgr).For(&operatorv1.MyWeb{}).Complete(reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		if seen[req.NamespacedName] = true; len(seen) == n {
			done()
		}
		return reconcile.Result{}, nil
	}))
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}
