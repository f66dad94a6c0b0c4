package chartimport

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stencil-operator/stencil/render"
	"github.com/stencil-operator/stencil/render/kindtest"
)

// Hook phases, as the import orders a hook's template file in the kind's
// graph.
const (
	// hookBefore: pre-install or pre-upgrade: the file is a graph node
	// that every other node comes after.
	hookBefore = "before"
	// hookAfter: post-install or post-upgrade: a node after every other.
	hookAfter = "after"
)

// hookPhase is where the hook annotation value hooks (helm.sh/hook's)
// puts its file; "" when it runs only on delete, rollback or test, which
// stencil has no moment for.
func hookPhase(hooks string) string {
	phase := ""
	for h := range strings.SplitSeq(hooks, ",") {
		switch strings.TrimSpace(h) {
		case "pre-install", "pre-upgrade":
			return hookBefore
		case "post-install", "post-upgrade":
			phase = hookAfter
		}
	}
	return phase
}

// graph is the _kind.yaml graph that orders the hooks' files: each file's
// node (its name without .yaml) after the hooks before it; a hook after
// the hooks of its phase that weigh less (helm.sh/hook-weight), and run
// once for what it renders, as Helm runs a hook once per release; nil
// without hooks.
func (f *Folder) graph() map[string]render.Node {
	if len(f.Hooks) == 0 {
		return nil
	}
	var before, rest, after []string
	for _, name := range slices.Sorted(maps.Keys(f.Files)) {
		if !strings.HasSuffix(name, ".yaml") || strings.HasPrefix(name, "_") || strings.Contains(name, "/") {
			continue
		}
		node := strings.TrimSuffix(name, ".yaml")
		switch f.Hooks[name] {
		case hookBefore:
			before = append(before, node)
		case hookAfter:
			after = append(after, node)
		default:
			rest = append(rest, node)
		}
	}
	g := map[string]render.Node{}
	for _, n := range rest {
		g[n] = render.Node{After: before}
	}
	for _, n := range before {
		g[n] = render.Node{After: f.lighter(n, before), Once: true}
	}
	for _, n := range after {
		g[n] = render.Node{After: append(append(slices.Clone(before), rest...), f.lighter(n, after)...), Once: true}
	}
	return g
}

// lighter are the hooks of phase that weigh less than hook.
func (f *Folder) lighter(hook string, phase []string) []string {
	var out []string
	for _, h := range phase {
		if f.HookWeights[h+".yaml"] < f.HookWeights[hook+".yaml"] {
			out = append(out, h)
		}
	}
	return out
}

// RenderConverged renders values with k as the release release in
// namespace as it is once every object is ready: for a kind whose hooks
// order its files (a graph), the render is repeated with each object
// before it live and healthy, until no node waits. It also returns those
// live objects (a test case's observed.yaml).
func RenderConverged(k *render.Kind, release, namespace string, values map[string]any) (objs, live []*unstructured.Unstructured, err error) {
	return renderConverged(k, NewResource(k.GroupVersionKind(), release, namespace, values), nil)
}

// renderConverged is RenderConverged of cr, with the generated values gen
// (nil: made offline).
func renderConverged(k *render.Kind, cr *Resource, gen *render.Generated) (objs, live []*unstructured.Unstructured, err error) {
	if k.Graph() == nil {
		plan, err := k.RenderGraph(cr, render.GraphInput{Generated: gen})
		if err != nil {
			return nil, nil, err
		}
		return plan.Objects, nil, nil
	}
	var snapshot render.Objects
	for range 10 {
		plan, err := k.RenderGraph(cr, render.GraphInput{Live: snapshot, Random: render.FixedRandom(), Generated: gen})
		if err != nil {
			return nil, nil, err
		}
		if len(plan.Waiting) == 0 {
			return plan.Objects, snapshot, nil
		}
		if len(plan.Objects) == len(snapshot) {
			return nil, nil, fmt.Errorf("the hooks' order does not converge offline, every object ready: %s", waitingNodes(plan.Waiting))
		}
		snapshot = snapshot[:0]
		for _, o := range plan.Objects {
			snapshot = append(snapshot, kindtest.Healthy(o.DeepCopy()))
		}
	}
	return nil, nil, fmt.Errorf("the graph does not converge in 10 renders")
}

// waitingNodes says which nodes wait, and for what.
func waitingNodes(ws []render.Waiting) string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = fmt.Sprintf("template %s.yaml waits for %s", w.Node, w.For)
	}
	return strings.Join(out, "; ")
}
