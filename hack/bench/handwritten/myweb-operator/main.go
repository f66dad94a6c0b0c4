// Command myweb-operator is the hand-written MyWeb operator of package
// handwritten, the contender `make bench-peers` measures stencil against.
//
//	myweb-operator --variant apply|get-update [--metrics-bind-address :8080] [--namespace ns]
//
// It connects with $KUBECONFIG (or in-cluster config), as controller-runtime
// programs do.
package main

import (
	"flag"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/stencil-operator/stencil/hack/bench/handwritten"
)

func main() {
	var opts handwritten.Options
	flag.StringVar((*string)(&opts.Variant), "variant", string(handwritten.VariantApply), "How objects are written: apply (server-side apply of typed apply configurations) or get-update (get, then create or update).")
	flag.StringVar(&opts.Namespace, "namespace", "", "Namespace to reconcile (default: all).")
	flag.StringVar(&opts.MetricsAddr, "metrics-bind-address", "0", "Address of /metrics (0: none).")
	flag.StringVar(&opts.PprofAddr, "pprof-bind-address", "", "Address of /debug/pprof (empty: none).")
	flag.IntVar(&opts.Workers, "concurrency", 8, "MyWebs reconciled at once.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	cfg, err := ctrl.GetConfig()
	if err == nil {
		var mgr ctrl.Manager
		if mgr, err = handwritten.NewManager(cfg, opts); err == nil {
			err = mgr.Start(ctrl.SetupSignalHandler())
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "myweb-operator:", err)
		os.Exit(1)
	}
}
