package reconciler

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// objectHealth is what kstatus says of a rendered object that is not
// healthy.
type objectHealth struct {
	// object is the object as "Kind name", message what kstatus says of it.
	object, message string
	// hint is the kubectl command that shows more.
	hint   string
	failed bool
}

// health judges the rendered objects of the types the kind judges
// (render.TypeRef.JudgesHealth) by the kstatus rules, from the objects as
// this reconcile's apply returned them, else from the cache: no request.
// An object the cache does not hold yet is not healthy yet; its event
// brings the resource back.
func (r *Reconciler) health(ctx context.Context, res *result) ([]objectHealth, error) {
	var found []objectHealth
	for _, d := range res.desired {
		if !r.kind.JudgesHealth(d.GroupVersionKind()) {
			continue
		}
		h := objectHealth{object: d.GetKind() + " " + d.GetName(), hint: "kubectl describe " + kubectlObject(d)}
		obj, err := r.wholeObject(ctx, d, res)
		if err != nil {
			return nil, err
		}
		if obj == nil {
			h.message = "not seen yet"
			found = append(found, h)
			continue
		}
		m, err := objectMap(obj)
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetGroupVersionKind(d.GroupVersionKind())
		verdict, err := kstatus.Compute(u)
		if err != nil {
			return nil, fmt.Errorf("judging the health of %s: %w", h.object, err)
		}
		if verdict.Status == kstatus.CurrentStatus {
			continue
		}
		h.message = strings.TrimSuffix(verdict.Message, ".")
		h.failed = verdict.Status == kstatus.FailedStatus
		found = append(found, h)
	}
	slices.SortStableFunc(found, func(a, b objectHealth) int { // failed first
		return cmpBool(b.failed, a.failed)
	})
	return found, nil
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// wholeObject is the live object d of a type cached whole: as this
// reconcile's apply returned it, else from the cache; nil when the cache
// does not hold it yet.
func (r *Reconciler) wholeObject(ctx context.Context, d *unstructured.Unstructured, res *result) (client.Object, error) {
	if obj, ok := res.live[idOf(d.GroupVersionKind(), d.GetNamespace(), d.GetName())]; ok {
		return obj, nil
	}
	obj := r.applier.types.newObject(d.GroupVersionKind())
	err := r.client.Get(ctx, client.ObjectKeyFromObject(d), obj)
	if client.IgnoreNotFound(err) != nil {
		return nil, fmt.Errorf("reading %s %s: %w", d.GetKind(), d.GetName(), err)
	}
	if err != nil {
		return nil, nil
	}
	return obj, nil
}

// healthMessage says which objects are not healthy yet (failed ones
// first) and what stencil does: it waits for their status to change,
// without polling.
func healthMessage(applied int, unhealthy []objectHealth) string {
	failed := 0
	for _, h := range unhealthy {
		if h.failed {
			failed++
		}
	}
	var b strings.Builder
	b.WriteString("All " + strconv.Itoa(applied) + " rendered objects are applied, but ")
	switch waiting := len(unhealthy) - failed; {
	case failed == 0:
		b.WriteString(strconv.Itoa(waiting) + " not ready yet: ")
	case waiting == 0:
		b.WriteString(strconv.Itoa(failed) + " failed: ")
	default:
		b.WriteString(strconv.Itoa(failed) + " failed and " + strconv.Itoa(waiting) + " not ready yet: ")
	}
	const shown = 3
	for i, h := range unhealthy[:min(len(unhealthy), shown)] {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(h.object + ": " + h.message)
	}
	if len(unhealthy) > shown {
		b.WriteString("; and " + strconv.Itoa(len(unhealthy)-shown) + " more")
	}
	b.WriteString(". ")
	if failed > 0 {
		b.WriteString("See why with " + unhealthy[0].hint + ". ")
	}
	b.WriteString("stencil looks again when their status changes.")
	return b.String()
}
