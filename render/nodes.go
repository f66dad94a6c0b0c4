package render

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// HasReadyWhen reports whether the graph node that rendered o (its
// annotation says which) declares readyWhen rules.
func (g *Graph) HasReadyWhen(o interface{ GetAnnotations() map[string]string }) bool {
	if g == nil {
		return false
	}
	k := g.k
	n := k.nodeOf(o)
	return n != nil && len(n.readyWhen) > 0
}

// NodeReady judges live, the live object of the rendered object d as the
// apply left it, by the rules of the graph node that rendered d, as a node
// that waits for it would: kstatus must call it current, a Job must be
// complete, and the node's readyWhen rules must write "true" (they run
// within the kind's render limits). why says what it waits for, naming it
// ("Job migrate to complete (…)"; a failed rule's message is withheld for a
// Secret), "" when it is ready; failed: waiting will not help (kstatus says
// it failed, or a rule went over a limit). An object that no graph node
// rendered has no rules: "".
func (g *Graph) NodeReady(d *unstructured.Unstructured, live map[string]any) (why string, failed bool) {
	if g == nil {
		return "", false
	}
	k := g.k
	n := k.nodeOf(d)
	if n == nil {
		return "", false
	}
	what := d.GetKind() + " " + d.GetName()
	run, err := k.execution(k.limits.Bytes, "rendered bytes")
	if err != nil {
		return what + ": cannot run its readyWhen rules: " + err.Error(), true
	}
	defer k.runs.put(run)
	u := &unstructured.Unstructured{Object: live}
	u.SetGroupVersionKind(d.GroupVersionKind())
	why, failed, limit := liveReadiness(run, n, what, u)
	return why, failed || limit != nil
}

// nodeOf is the graph node that rendered o, nil when none did.
func (k *Kind) nodeOf(o interface{ GetAnnotations() map[string]string }) *graphNode {
	if k.graph == nil {
		return nil
	}
	return k.graph.nodes[o.GetAnnotations()[v1alpha1.AnnotationGraphNode]]
}

// NodeInputs are the inputs that the template file of a graph kind's node
// reads (nil when file is no node's or reads none): what a failure of
// that template may come from.
func (g *Graph) NodeInputs(file string) []Input {
	if g == nil {
		return nil
	}
	k := g.k
	if k.graph == nil {
		return nil
	}
	n := k.graph.nodes[strings.TrimSuffix(file, ".yaml")]
	if n == nil {
		return nil
	}
	out := make([]Input, 0, len(n.reads))
	for _, name := range n.reads {
		out = append(out, k.graph.inputs[name].Input)
	}
	return out
}
