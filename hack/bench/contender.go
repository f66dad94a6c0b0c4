package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1 "github.com/stencil-operator/stencil/api/operator/v1"
	"github.com/stencil-operator/stencil/hack/bench/handwritten"
)

// contender is an operator that the bench runs as a process and measures
// past convergence: how to start it, what it reconciles, and how its
// metrics tell that it has checked every resource.
type contender struct {
	// name is the contender's in the results; user its API user, as the
	// audit log names it.
	name, user string
	binary     string
	// args are its flags, given the address of its metrics and of its
	// pprof endpoint.
	args func(metrics, pprof string) []string
	// web is the kind of the custom resources it reconciles.
	web webKind
	// reconciles counts its reconciles of web; depth is its queue's length.
	reconciles, depth metric
	// stencil: the CPU profiles, the upgrade preview, and stricter checks.
	stencil bool
	// pprof: it serves /debug/pprof, so the bench takes its heap profile.
	pprof bool
}

// metric is one metric of a contender's /metrics, summed over the samples
// whose labels contain every one of labels.
type metric struct {
	name   string
	labels []string
}

// webKind is the kind of the N custom resources a contender converges:
// MyWeb, or a peer's kind with MyWeb's spec.
type webKind struct {
	gvk schema.GroupVersionKind
	// prepare makes the kind known to the API server (the MyWeb CRD is
	// always installed).
	prepare func(ctx context.Context, e *env) error
	// converged says that a resource is done; unused for MyWeb, whose
	// Ready condition says it (see isReady).
	converged func(u *unstructured.Unstructured) bool
	// health: the contender reports its Deployments' health in MyWeb's
	// Ready condition, so the bench measures what seeing it costs.
	health bool
}

func (k webKind) isMyWeb() bool { return k.gvk == myWebKindOf.gvk }

// objects are the N resources of the kind, from myWebs.
func (k webKind) objects(n, namespaces int) []client.Object {
	webs := myWebs(n, namespaces)
	out := make([]client.Object, len(webs))
	for i, w := range webs {
		if k.isMyWeb() {
			out[i] = w
			continue
		}
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
			"image": w.Spec.Image, "nodePortNumber": int64(w.Spec.NodePortNumber), "pageContentHtml": w.Spec.PageContentHtml,
		}}}
		u.SetGroupVersionKind(k.gvk)
		u.SetNamespace(w.Namespace)
		u.SetName(w.Name)
		out[i] = u
	}
	return out
}

var myWebKindOf = webKind{gvk: operatorv1.GroupVersion.WithKind("MyWeb"), health: true}

// controllerRuntimeMetrics are the reconcile count and queue depth that
// controller-runtime keeps for the controller named controller.
func controllerRuntimeMetrics(controller string) (reconciles, depth metric) {
	return metric{"controller_runtime_reconcile_total", []string{`controller="` + controller + `"`}},
		metric{"workqueue_depth", []string{`name="` + controller + `"`}}
}

func stencilContender(cfg config) *contender {
	c := &contender{name: "stencil", user: "stencil", binary: filepath.Join(cfg.bin, "stencil"), web: myWebKindOf, stencil: true, pprof: true,
		args: func(metrics, pprof string) []string {
			return append([]string{"--metrics-bind-address=" + metrics, "--pprof-bind-address=" + pprof, "--health-probe-bind-address=0"}, cfg.stencilArgs...)
		}}
	c.reconciles, c.depth = controllerRuntimeMetrics("myweb")
	return c
}

// aloneContender is stencil with one sample kind, built from the public API
// as a project that `stencil init` makes is (hack/bench/onekind): what a
// user's operator of that kind costs, where bin/stencil runs every sample
// kind.
func aloneContender(cfg config, kind string, web webKind) *contender {
	c := &contender{name: "stencil (" + kind + " alone)", user: "stencil-alone", binary: filepath.Join(cfg.bin, "onekind"), web: web, pprof: true,
		args: func(metrics, pprof string) []string {
			return append([]string{kind, "--metrics-bind-address=" + metrics, "--pprof-bind-address=" + pprof, "--health-probe-bind-address=0"}, cfg.stencilArgs...)
		}}
	c.reconciles, c.depth = controllerRuntimeMetrics(strings.ToLower(kind))
	return c
}

// handwrittenContender is the hand-written MyWeb operator
// (hack/bench/handwritten) in one of its variants.
func handwrittenContender(cfg config, v handwritten.Variant) *contender {
	c := &contender{name: "hand-written (" + string(v) + ")", user: "myweb-" + string(v), binary: filepath.Join(cfg.bin, "myweb-operator"), web: myWebKindOf, pprof: true,
		args: func(metrics, pprof string) []string {
			return []string{"--variant=" + string(v), "--metrics-bind-address=" + metrics, "--pprof-bind-address=" + pprof}
		}}
	c.reconciles, c.depth = controllerRuntimeMetrics("myweb")
	return c
}

// String names the contender in errors.
func (c *contender) String() string { return fmt.Sprintf("%s (%s)", c.name, filepath.Base(c.binary)) }
