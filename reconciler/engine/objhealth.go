package engine

import (
	"strings"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ObjectHealth is what kstatus says of a rendered object.
type ObjectHealth struct {
	// Object is the object as "Kind name", message what kstatus says of it.
	Object, Message string
	// Hint is the kubectl command that shows more.
	Hint string
	// Current: healthy; failed: kstatus gives up on it (else it is on its
	// way).
	Current, Failed bool
	// Named: Message names the object itself, as a graph node's readiness
	// rules do ("Job migrate to complete (…)").
	Named bool
}

// JudgeMap is what kstatus says of m, the live object d. An object kstatus
// cannot judge (a status of an unexpected shape) has failed its health
// check (waiting would not change it), and the message says why; it does
// not fail the reconcile.
func JudgeMap(d *unstructured.Unstructured, m map[string]any) ObjectHealth {
	h := Unjudged(d)
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(d.GroupVersionKind())
	verdict, err := kstatus.Compute(u)
	if err != nil {
		h.Message, h.Failed = "cannot judge its health: "+err.Error(), true
		return h
	}
	h.Message = strings.TrimSuffix(verdict.Message, ".")
	h.Current = verdict.Status == kstatus.CurrentStatus
	h.Failed = verdict.Status == kstatus.FailedStatus
	return h
}

// Unjudged is d's ObjectHealth before anything is said of it: the object
// and its hint only.
func Unjudged(d *unstructured.Unstructured) ObjectHealth {
	return ObjectHealth{Object: d.GetKind() + " " + d.GetName(), Hint: "kubectl describe " + kubectlObject(d)}
}
