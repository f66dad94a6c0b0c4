package reconciler

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/reconciler/engine"
)

// health judges the rendered objects of the types the kind judges
// (render.TypeRef.JudgesHealth) by the kstatus rules, and a graph kind's by
// the rules of their nodes too (see judge), with no request: as
// this reconcile's apply returned them, or as our last apply did while the
// cache lags behind it, else from the cache. It returns those that are not
// healthy, failed ones first. An object the cache does not hold yet is not
// healthy yet; its event brings the resource back. An object the cache
// cannot read is not healthy either, and the error (to retry) says why.
func (r *Reconciler) health(ctx context.Context, res *result) ([]engine.ObjectHealth, error) {
	var failed, waiting []engine.ObjectHealth
	var errs []error
	for _, d := range res.desired {
		if !r.kind().JudgesHealth(d.GroupVersionKind()) && !r.kind().Graph().HasReadyWhen(d) {
			continue
		}
		h, err := r.judgeLive(ctx, d, res)
		errs = append(errs, err)
		switch {
		case h.Failed:
			failed = append(failed, h)
		case !h.Current:
			waiting = append(waiting, h)
		}
	}
	return append(failed, waiting...), errors.Join(errs...)
}

// judgeLive judges the live object d (see health).
func (r *Reconciler) judgeLive(ctx context.Context, d *unstructured.Unstructured, res *result) (engine.ObjectHealth, error) {
	m, err := r.wholeMap(ctx, d, res)
	if err != nil {
		h := engine.Unjudged(d)
		h.Message = "cannot read it from the cache: " + err.Error()
		return h, err
	}
	var rv uint64
	if m != nil {
		rv = engine.ResourceVersion(&unstructured.Unstructured{Object: m})
	}
	if _, fresh := res.live[engine.IDOf(d)]; fresh {
		h := r.judge(d, m)
		r.applier.RememberHealth(d, rv, h)
		return h, nil
	}
	if h := r.applier.PendingHealth(d, rv); h != nil {
		return *h, nil
	}
	if m == nil {
		h := engine.Unjudged(d)
		h.Message = "not seen yet"
		return h, nil
	}
	return r.judge(d, m), nil
}

// judge is what kstatus says of m, the live object d, and, of a graph
// kind's object that kstatus calls current, what the rules of its node say
// (a Job must be complete, the readyWhen rules must pass): the resource is
// Ready only when every node's objects are ready as a node that waits for
// them would find them, those of the nodes nothing waits for too.
func (r *Reconciler) judge(d *unstructured.Unstructured, m map[string]any) engine.ObjectHealth {
	h := engine.JudgeMap(d, m)
	if !h.Current {
		return h
	}
	if why, failed := r.kind().Graph().NodeReady(d, m); why != "" {
		h.Current, h.Failed, h.Message, h.Named = false, failed, why, true
	}
	return h
}

// wholeMap is the live object d of a type cached whole, as a map: as this
// reconcile's apply returned it (trimmed as the cache trims it), else from
// the cache; nil when the cache
// does not hold it yet. Each object is converted once per reconcile (the
// status template and health both read it).
func (r *Reconciler) wholeMap(ctx context.Context, d *unstructured.Unstructured, res *result) (map[string]any, error) {
	id := engine.IDOf(d)
	if m, ok := res.maps[id]; ok {
		return m, nil
	}
	obj, ok := res.live[id]
	if ok && r.applier.Types().Trimmed.Trims(r.kind().GroupVersionKind().GroupKind(), d.GroupVersionKind()) {
		// As the cache holds it: what a status template reads of it is
		// the same whether this reconcile applied it or not.
		if trimmed, _ := engine.Trim(obj.DeepCopyObject()); trimmed != nil {
			if o, ok := trimmed.(client.Object); ok {
				obj = o
			}
		}
	}
	if !ok {
		obj = r.applier.Types().NewObject(d.GroupVersionKind())
		err := r.client.Get(ctx, client.ObjectKeyFromObject(d), obj)
		if client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("reading %s %s: %w", d.GetKind(), d.GetName(), err)
		}
		if err != nil {
			obj = nil
		}
	}
	var m map[string]any
	if obj != nil {
		var err error
		if m, err = engine.ObjectMap(obj); err != nil {
			return nil, err
		}
	}
	if res.maps == nil {
		res.maps = map[engine.ObjectID]map[string]any{}
	}
	res.maps[id] = m
	return m, nil
}

// healthMessage says which objects are not healthy yet (failed ones
// first) and what stencil does: it waits for their status to change,
// without polling.
func healthMessage(applied int, unhealthy []engine.ObjectHealth) string {
	failed := 0
	for _, h := range unhealthy {
		if h.Failed {
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
	b.WriteString(firstFew(len(unhealthy), func(i int) string { return describe(unhealthy[i]) }, "; ", "; "))
	b.WriteString(". ")
	if failed > 0 {
		b.WriteString("See why with " + unhealthy[0].Hint + ". ")
	}
	b.WriteString("stencil looks again when their status changes.")
	return b.String()
}

// describe is h as healthMessage lists it: the object and what is wrong
// with it.
func describe(h engine.ObjectHealth) string {
	if h.Named {
		return h.Message
	}
	return h.Object + ": " + h.Message
}

// firstFew lists the first 3 of n items, joined by sep, and how many more
// there are after more ("a; b; c; and 2 more").
func firstFew(n int, item func(i int) string, sep, more string) string {
	const shown = 3
	var b strings.Builder
	for i := range min(n, shown) {
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(item(i))
	}
	if n > shown {
		b.WriteString(more + "and " + strconv.Itoa(n-shown) + " more")
	}
	return b.String()
}
