package render

import (
	"errors"
	"fmt"
	"strings"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// How a graph node's dependencies are judged ready: the objects of the
// nodes before it, as the live state shows them.

// readiness of a rendered node: its live objects, and why it is not ready
// ("" when it is).
type readiness struct {
	live   []map[string]any
	why    string
	failed bool
}

// blocked is why n may not render yet: a dependency that did not render or
// is not ready ("" when none), and whether that one failed.
func (gr *graphRun) blocked(n *graphNode) (string, bool) {
	for _, a := range n.after {
		if _, ok := gr.rendered[a]; !ok {
			return a + " (which waits too)", gr.failed(a)
		}
		if r := gr.readiness(a); r.why != "" {
			return a + ": " + r.why, r.failed
		}
	}
	return "", false
}

// failed: node name waits for something that failed.
func (gr *graphRun) failed(name string) bool {
	for _, w := range gr.plan.Waiting {
		if w.Node == name {
			return w.Failed
		}
	}
	return false
}

// readiness judges a rendered node's objects on their live state: each must
// exist, be this resource's, hold this render (its desired hash; a
// createOnly object only has to exist), be current by the kstatus rules and
// pass the node's readyWhen rules.
func (gr *graphRun) readiness(name string) readiness {
	if r, ok := gr.ready[name]; ok {
		return r
	}
	n := gr.k.graph.nodes[name]
	r := readiness{}
	for _, d := range gr.rendered[name] {
		live, err := gr.in.Live.Get(d.GroupVersionKind(), d.GetNamespace(), d.GetName())
		var limit error
		if r.why, r.failed, limit = objectReadiness(gr.run, n, d, live, err, gr.owner); r.why != "" {
			if gr.limit == nil {
				gr.limit = limit
			}
			r.live = nil
			break
		}
		r.live = append(r.live, live.Object)
	}
	gr.ready[name] = r
	return r
}

// objectReadiness is why d's live object is not ready ("" when it is),
// and whether it failed. The node's readyWhen rules run in run, within the
// render's limits: a rule that goes over one returns the limit's error
// too, which fails the render.
func objectReadiness(run *execution, n *graphNode, d, live *unstructured.Unstructured, err error, own owner) (string, bool, error) {
	what := d.GetKind() + " " + d.GetName()
	switch {
	case err != nil:
		return what + ": cannot be read: " + err.Error(), false, nil //nolint:nilerr // a wait that says why, not a failure of the render
	case live == nil:
		return what + " to be created", false, nil
	case live.GetLabels()[v1alpha1.LabelOwnerUID] != string(own.uid):
		return what + ", which is not this resource's", false, nil
	case !n.CreateOnly && live.GetAnnotations()[v1alpha1.AnnotationDesiredHash] != d.GetAnnotations()[v1alpha1.AnnotationDesiredHash]:
		return what + " to be updated", false, nil
	}
	return liveReadiness(run, n, what, live)
}

// liveReadiness is objectReadiness of a live object known to be this
// render's: by the node's rules, it must be current by the kstatus rules,
// complete if it is a Job, and pass the node's readyWhen rules. what names
// it in the answer.
func liveReadiness(run *execution, n *graphNode, what string, live *unstructured.Unstructured) (string, bool, error) {
	u := live.DeepCopy()
	verdict, err := kstatus.Compute(u)
	switch {
	case err != nil:
		return what + ": cannot judge its health: " + err.Error(), true, nil //nolint:nilerr // a verdict on the object, not a failure of the render
	case verdict.Status == kstatus.FailedStatus:
		return what + ", which failed (" + strings.TrimSuffix(verdict.Message, ".") + ")", true, nil
	case verdict.Status != kstatus.CurrentStatus:
		return what + " to be ready (" + strings.TrimSuffix(verdict.Message, ".") + ")", false, nil
	case isJob(live) && !conditionTrue(live, "Complete"):
		// kstatus calls a running Job current; what waits for a Job
		// waits for it to complete.
		return what + " to complete (" + strings.TrimSuffix(verdict.Message, ".") + ")", false, nil
	}
	for i, rule := range n.readyWhen {
		out, err := run.rule(rule, live.Object)
		if err != nil {
			return readyWhenFailed(n, what, i, live.GetKind() == "Secret", err)
		}
		if out != "true" {
			return fmt.Sprintf("%s: readyWhen[%d] %s", what, i, n.ReadyWhen[i]), false, nil
		}
	}
	return "", false, nil
}

// readyWhenFailed is objectReadiness after readyWhen rule i failed with
// err: its message is withheld when the object is a Secret, and a limit's
// error fails the render too (a LimitError underneath, withheld or not).
func readyWhenFailed(n *graphNode, what string, i int, secret bool, err error) (string, bool, error) {
	why := fmt.Sprintf("%s: readyWhen[%d] failed: %v", what, i, err)
	if secret {
		why = fmt.Sprintf("%s: readyWhen[%d] failed (its message is withheld: it may quote the Secret's data)", what, i)
	}
	limit, over := errors.AsType[*LimitError](err)
	if !over {
		return why, false, nil
	}
	fail := fmt.Errorf("%s: readyWhen[%d]: %w", what, i, limit)
	if secret {
		fail = &heldError{msg: why, limit: limit}
	}
	return why, false, &Error{File: n.file, Err: fail}
}

func isJob(o *unstructured.Unstructured) bool {
	gvk := o.GroupVersionKind()
	return gvk.Group == "batch" && gvk.Kind == "Job"
}

// conditionTrue: o's status has a condition of type typ with status True.
func conditionTrue(o *unstructured.Unstructured, typ string) bool {
	conditions, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conditions {
		if m, ok := c.(map[string]any); ok && m["type"] == typ && m["status"] == "True" {
			return true
		}
	}
	return false
}
