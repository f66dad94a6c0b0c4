package decorator

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/reconciler/engine"
	"github.com/stencil-operator/stencil/reconciler/fence"
	"github.com/stencil-operator/stencil/reconciler/syncmap"
	"github.com/stencil-operator/stencil/render"
)

// A decorator's parent belongs to someone else (the ReplicaSet controller,
// whoever created the Namespace). stencil applies to it only the labels and
// annotations the templates render, under a field manager of the
// decorator's own, so that no other manager's field is ever touched; it
// never sets an ownerReference on the parent and never deletes it. When the
// parent stops matching the decorator's selector, its fields are given up
// (an apply of nothing under that manager: the API server removes what only
// it held) and its children are pruned.

// Manager is the field manager of decorator name's applies, to
// its parents and children alike.
func Manager(name string) string { return "stencil-decorator-" + name }

// decoratorReconciler reconciles the parents of one decorator.
type decoratorReconciler struct {
	dec      *render.Decorator
	cache    cache.Cache // the decorators' cache: parents, observed objects, children
	client   client.Client
	reader   client.Reader // the API server, for objects the cache does not hold
	recorder events.EventRecorder
	types    engine.CachedTypes // parents: whole, typed when the scheme knows them
	scope    *scope             // the parents it decorates, and those the cache holds
	mayWrite func() error
	// disabled: the decorator gives up what it set, on every parent.
	disabled bool
	// written holds, by parent, the decorator's last apply to it: a cached
	// parent older than that is not judged (its drift would be counted
	// twice) but tried again shortly, for writtenGrace.
	written syncmap.Map[types.NamespacedName, writtenParent]
	// forgetParent drops what the event mapper remembers of a parent.
	forgetParent func(types.NamespacedName)
}

// Reconcile brings one parent to what the decorator renders for it.
func (r *decoratorReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	gvk := r.dec.Declaration().Decorates.GroupVersionKind()
	parent := r.types.NewObject(gvk)
	if err := r.cache.Get(ctx, req.NamespacedName, parent); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, err
		}
		// Gone, or out of the cache's selector (then given up below).
		if parent, err = r.leftScope(ctx, req.NamespacedName); err != nil {
			return reconcile.Result{}, err
		}
		if parent == nil {
			// Its children go with it: they carry its ownerReference.
			decorated.forget(r.dec.Name(), req.NamespacedName)
			r.written.Delete(req.NamespacedName)
			if r.forgetParent != nil {
				r.forgetParent(req.NamespacedName)
			}
			return reconcile.Result{}, nil
		}
	}
	if parent.GetDeletionTimestamp() != nil {
		return reconcile.Result{}, nil
	}
	if r.cacheBehind(parent) {
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	if r.mayWrite != nil {
		if err := r.mayWrite(); err != nil {
			return fence.Requeue(ctx, err)
		}
	}
	err := r.decorate(ctx, parent, gvk)
	if errors.Is(err, fence.ErrFenced) {
		return fence.Requeue(ctx, err)
	}
	return reconcile.Result{}, err
}

// writtenParent is the decorator's last apply to a parent.
type writtenParent struct {
	uid             types.UID
	resourceVersion uint64
	at              time.Time
}

// writtenGrace bounds how long a reconcile waits for the cache to show the
// decorator's own apply (it always does, unless resourceVersions went
// backwards, as after an etcd restore).
const writtenGrace = 10 * time.Second

// cacheBehind: the cached parent is older than the decorator's last apply
// to it, less than writtenGrace ago.
func (r *decoratorReconciler) cacheBehind(parent client.Object) bool {
	w, ok := r.written.Load(client.ObjectKeyFromObject(parent))
	if !ok {
		return false
	}
	return w.uid == parent.GetUID() && engine.ResourceVersion(parent) < w.resourceVersion && time.Since(w.at) < writtenGrace
}

// decorate renders and applies, or, for a parent the selector or the scope
// no longer selects, gives up what the decorator set.
func (r *decoratorReconciler) decorate(ctx context.Context, parent client.Object, gvk schema.GroupVersionKind) error {
	key := client.ObjectKeyFromObject(parent)
	in := !r.disabled && r.dec.Decorates(parent)
	if in {
		var err error
		if in, err = r.scope.contains(ctx, r.cache, r.types, parent); err != nil {
			return err
		}
	}
	if !in {
		decorated.forget(r.dec.Name(), key)
		return r.release(ctx, parent, gvk)
	}
	u, err := parentMap(parent, gvk)
	if err != nil {
		return err
	}
	observed, err := r.observe(ctx, u)
	if err != nil {
		return err
	}
	patch, children, err := r.dec.Render(u, observed)
	if err == nil && patch == nil && len(children) == 0 {
		err = fmt.Errorf("the templates rendered nothing for %s %s", gvk.Kind, key)
	}
	if err != nil {
		// Nothing is applied or pruned after a failed render; a change of
		// the parent or of what it observes tries again.
		r.fail(parent, "RenderFailed", "Render", err)
		return nil
	}
	// The children first, and the parent only once they all are there:
	// what the parent's patch says of them (namespace-defaults' annotation
	// lists them) is then true, and never claims one that another's object
	// blocked.
	if err := r.applyChildren(ctx, parent, children); err != nil {
		return r.failed(parent, "ApplyFailed", "Apply", err)
	}
	if err := r.applyParent(ctx, parent, patch); err != nil {
		return r.failed(parent, "ApplyFailed", "Apply", err)
	}
	if err := r.prune(ctx, parent, children); err != nil {
		return r.failed(parent, "PruneFailed", "Prune", err)
	}
	decorated.set(r.dec.Name(), key)
	return nil
}

// fail reports a failure on the parent (a Warning event) and in a metric.
func (r *decoratorReconciler) fail(parent client.Object, reason, action string, err error) {
	decoratorFailures.WithLabelValues(r.dec.Name(), reason).Inc()
	r.recorder.Eventf(parent, nil, corev1.EventTypeWarning, reason, action, "decorator %s: %s", r.dec.Name(), err)
}

// failed reports err as fail does, unless the fence refused the write (that
// is no failure), and returns it for the controller's backoff.
func (r *decoratorReconciler) failed(parent client.Object, reason, action string, err error) error {
	if !errors.Is(err, fence.ErrFenced) {
		r.fail(parent, reason, action, err)
	}
	return err
}

// parentMap is parent as the templates read it: its fields as maps, with
// its type set.
func parentMap(parent client.Object, gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	m, err := engine.ObjectMap(parent)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// observe lists, for each type the decorator observes, the objects related
// to parent: by the labels the parent names, or by ownerReference.
func (r *decoratorReconciler) observe(ctx context.Context, parent *unstructured.Unstructured) (map[string][]*unstructured.Unstructured, error) {
	out := map[string][]*unstructured.Unstructured{}
	for _, o := range r.dec.Declaration().Observes {
		objs, err := r.observed(ctx, o, parent)
		if err != nil {
			return nil, fmt.Errorf("listing the %s that %s observes: %w", o.Kind, parent.GetName(), err)
		}
		out[o.As] = objs
	}
	return out, nil
}

func (r *decoratorReconciler) observed(ctx context.Context, o render.Observed, parent *unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	opts := []client.ListOption{client.InNamespace(render.ChildNamespace(parent))}
	if o.MatchLabelsFrom != "" {
		sel, err := render.ObservedSelector(o, parent)
		if err != nil || sel == nil {
			return nil, err // a parent without those labels observes nothing
		}
		opts = append(opts, client.MatchingLabelsSelector{Selector: sel})
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(o.GroupVersionKind().GroupVersion().WithKind(o.Kind + "List"))
	opts = append(opts, client.UnsafeDisableDeepCopy) // converted to maps below, never changed
	if err := r.cache.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for i := range list.Items {
		item := &list.Items[i]
		if o.OwnedByParent && !ownedByUID(item, parent.GetUID()) {
			continue
		}
		// Converted without a write: the item is the cache's own.
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(item)
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetGroupVersionKind(o.GroupVersionKind())
		out = append(out, u)
	}
	return out, nil
}

// ownedByUID: obj has an ownerReference to uid.
func ownedByUID(obj metav1.Object, uid types.UID) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == uid {
			return true
		}
	}
	return false
}

// Status is what a decorator records on its parent, in the
// annotation StatusAnnotation(name), written in the same apply as
// its labels (so it costs no request of its own) and given up with them.
type Status struct {
	// Holds lists the keys the decorator applied ("labels/<key>",
	// "annotations/<key>"): a key another manager changes afterwards is
	// drift, set back; a key another manager set first is not taken.
	Holds []string `json:"holds,omitempty"`
	// Reverted counts the fields stencil set back after another manager
	// changed or removed them.
	Reverted int `json:"reverted,omitempty"`
	// Last is the last of them.
	Last *v1alpha1.FieldDrift `json:"last,omitempty"`
	// Conflicts lists the keys another manager set first, which the
	// decorator renders and leaves as they are (told once per change).
	Conflicts []string `json:"conflicts,omitempty"`
}

// StatusAnnotation is the annotation of decorator name's status.
func StatusAnnotation(name string) string { return v1alpha1.AnnotationDecoratorStatus + name }

// applyParent applies the labels and annotations of patch to parent when
// they are not as rendered, or when the decorator holds keys it no longer
// renders. A key it applied before and another manager changed or removed
// is set back, counted and told (event DriftReverted, the status
// annotation); a key another manager set that the decorator never held is
// left as it is (event KeyConflict): stencil takes nothing over. patch nil:
// the templates set nothing on the parent; what the decorator held is
// given up.
func (r *decoratorReconciler) applyParent(ctx context.Context, parent client.Object, patch *unstructured.Unstructured) error {
	name := r.dec.Name()
	owned, err := ownedMetadata(parent.GetManagedFields(), Manager(name))
	if err != nil {
		return err
	}
	if patch == nil {
		if !owned.held {
			return nil
		}
		return r.applyMetadata(ctx, parent, nil, nil)
	}
	labels, annotations := maps.Clone(patch.GetLabels()), maps.Clone(patch.GetAnnotations())
	st := Status{}
	if raw, ok := parent.GetAnnotations()[StatusAnnotation(name)]; ok && owned.annotations[StatusAnnotation(name)] {
		_ = json.Unmarshal([]byte(raw), &st) // unreadable: what it held is read from managedFields alone
	}
	held := map[string]bool{}
	for _, k := range st.Holds {
		held[k] = true
	}
	plan := judgeMetadata(parent, owned, held, labels, annotations)
	st.Holds = plan.holds
	for _, d := range plan.drifts {
		st.Reverted++
		st.Last = &d
	}
	newConflicts := !slices.Equal(st.Conflicts, plan.foreign)
	st.Conflicts = plan.foreign
	raw, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[StatusAnnotation(name)] = string(raw)
	if len(plan.drifts) == 0 && owned.equal(parent, labels, annotations) {
		return nil
	}
	if err := r.applyMetadata(ctx, parent, labels, annotations); err != nil {
		return err
	}
	if newConflicts && len(plan.foreign) > 0 {
		r.fail(parent, "KeyConflict", "Apply", fmt.Errorf("%s set by another manager, which stencil never held: left as they are (remove them, or the template's keys)", strings.Join(plan.foreign, ", ")))
	}
	for _, d := range plan.drifts {
		engine.CountObjects(name, 0, 0, 1)
		r.recorder.Eventf(parent, nil, corev1.EventTypeNormal, "DriftReverted", "Apply", "decorator %s set %s back to %s (%s had set %s)", name, d.Path, d.Desired, cmp.Or(d.Manager, "another manager"), orRemoved(d.Live))
	}
	return nil
}

func orRemoved(v string) string { return cmp.Or(v, "nothing: removed it") }

// metadataPlan is what applyParent does with the rendered keys.
type metadataPlan struct {
	drifts  []v1alpha1.FieldDrift // keys held before that another manager changed or removed: set back
	foreign []string              // keys another manager set that the decorator never held: left out
	holds   []string              // the keys applied
}

// judgeMetadata sorts the rendered labels and annotations (the maps lose
// the foreign keys). owned: what the decorator holds now, by
// managedFields; held: what it applied before (its status annotation), as
// "labels/<key>" and "annotations/<key>". An update by another manager
// takes a key over, so a key held before and not now, with another value
// or gone, is drift.
func judgeMetadata(parent client.Object, owned ownedKeys, held map[string]bool, labels, annotations map[string]string) metadataPlan {
	var plan metadataPlan
	judge := func(field string, want, live map[string]string, holds map[string]bool) {
		for _, k := range slices.Sorted(maps.Keys(want)) {
			v, exists := live[k]
			switch {
			case holds[k], exists && v == want[k] && held[field+"/"+k]:
				// ours (perhaps with an older value), or ours before and
				// set to the same value by another manager
			case exists && v == want[k] && managerOfKey(parent, field, k) != "":
				// another manager's key with the rendered value: not taken
				// either (a later change of either value would take it)
				delete(want, k)
				continue
			case held[field+"/"+k]:
				manager, at := managerOf(parent.GetManagedFields(), field, k)
				d := v1alpha1.FieldDrift{Path: ".metadata." + field + "." + k, Desired: strconv.Quote(want[k]), Manager: manager, Time: at}
				if exists {
					d.Live = strconv.Quote(v)
				}
				if field == "annotations" { // annotations may hold what a log should not
					d.Desired, d.Live = maskValue(d.Desired), maskValue(d.Live)
				}
				plan.drifts = append(plan.drifts, d)
			case exists:
				plan.foreign = append(plan.foreign, "metadata."+field+"."+k)
				delete(want, k)
				continue
			}
			plan.holds = append(plan.holds, field+"/"+k)
		}
	}
	judge("labels", labels, parent.GetLabels(), owned.labels)
	judge("annotations", annotations, parent.GetAnnotations(), owned.annotations)
	return plan
}

// managerOfKey names the manager that holds a label or annotation key.
func managerOfKey(parent client.Object, field, key string) string {
	m, _ := managerOf(parent.GetManagedFields(), field, key)
	return m
}

// maskValue hides an annotation's value, keeping whether there was one.
func maskValue(v string) string {
	if v == "" {
		return ""
	}
	return `"(not shown)"`
}

// release gives up everything decorator r set on parent: its fields on the
// parent (when it holds any) and its children.
func (r *decoratorReconciler) release(ctx context.Context, parent client.Object, gvk schema.GroupVersionKind) error {
	owned, err := ownedMetadata(parent.GetManagedFields(), Manager(r.dec.Name()))
	if err != nil {
		return err
	}
	if owned.held {
		if err := r.applyMetadata(ctx, parent, nil, nil); err != nil {
			return r.failed(parent, "ReleaseFailed", "Release", err)
		}
		r.recorder.Eventf(parent, nil, corev1.EventTypeNormal, "Released", "Release", "decorator %s no longer decorates this %s: its labels and annotations are removed", r.dec.Name(), gvk.Kind)
	}
	if err := r.prune(ctx, parent, nil); err != nil {
		return r.failed(parent, "PruneFailed", "Prune", err)
	}
	return nil
}

// applyMetadata server-side-applies labels and annotations to parent under
// the decorator's field manager. Force: a key another manager set is taken
// (the decorator's templates say it is stencil's). Nothing else is sent, so
// nothing else is touched; an apply with no keys gives up every field the
// manager held.
func (r *decoratorReconciler) applyMetadata(ctx context.Context, parent client.Object, labels, annotations map[string]string) error {
	gvk := r.dec.Declaration().Decorates.GroupVersionKind()
	body := &unstructured.Unstructured{}
	body.SetGroupVersionKind(gvk)
	body.SetName(parent.GetName())
	body.SetNamespace(parent.GetNamespace())
	body.SetLabels(labels)
	body.SetAnnotations(annotations)
	target, err := r.forceApply(ctx, body)
	if err != nil {
		return fmt.Errorf("applying the labels and annotations of decorator %s to %s %s: %w", r.dec.Name(), gvk.Kind, client.ObjectKeyFromObject(parent), err)
	}
	r.written.Store(client.ObjectKeyFromObject(parent), writtenParent{uid: parent.GetUID(), resourceVersion: engine.ResourceVersion(target), at: time.Now()})
	return nil
}

// Holds lists the labels and annotations decorator name holds on
// obj, sorted, as obj's managedFields record them.
func Holds(obj metav1.Object, name string) (labels, annotations []string, err error) {
	owned, err := ownedMetadata(obj.GetManagedFields(), Manager(name))
	if err != nil {
		return nil, nil, err
	}
	return slices.Sorted(maps.Keys(owned.labels)), slices.Sorted(maps.Keys(owned.annotations)), nil
}

// ownedKeys are the labels and annotations a field manager holds on an
// object, as its managedFields record them.
type ownedKeys struct {
	held                bool // the manager has an entry with any field
	labels, annotations map[string]bool
}

// equal: the live object has exactly the wanted keys held by the manager,
// with the wanted values.
func (o ownedKeys) equal(parent client.Object, labels, annotations map[string]string) bool {
	same := func(want map[string]string, held map[string]bool, live map[string]string) bool {
		if len(want) != len(held) {
			return false
		}
		for k, v := range want {
			if got, ok := live[k]; !ok || got != v || !held[k] {
				return false
			}
		}
		return true
	}
	return same(labels, o.labels, parent.GetLabels()) && same(annotations, o.annotations, parent.GetAnnotations())
}

// ownedMetadata reads from managedFields the labels and annotations that
// manager holds through its applies.
func ownedMetadata(entries []metav1.ManagedFieldsEntry, manager string) (ownedKeys, error) {
	out := ownedKeys{labels: map[string]bool{}, annotations: map[string]bool{}}
	for _, e := range entries {
		if e.Manager != manager || e.Operation != metav1.ManagedFieldsOperationApply || e.FieldsV1 == nil {
			continue
		}
		keys, held, err := metadataKeys(e)
		if err != nil {
			return out, fmt.Errorf("parsing managedFields of %s: %w", manager, err)
		}
		out.held = out.held || held
		maps.Copy(out.labels, keys["labels"])
		maps.Copy(out.annotations, keys["annotations"])
	}
	return out, nil
}

// managerOf names the manager that holds label or annotation key (field:
// "labels" or "annotations") on an object and when it last wrote, or ""
// when none is recorded.
func managerOf(entries []metav1.ManagedFieldsEntry, field, key string) (string, *metav1.Time) {
	for _, e := range entries {
		if e.FieldsV1 == nil {
			continue
		}
		if keys, _, err := metadataKeys(e); err == nil && keys[field][key] {
			return e.Manager, e.Time
		}
	}
	return "", nil
}

// metadataKeys reads from one managedFields entry the label and annotation
// keys it holds, by field ("labels", "annotations"), and whether it holds
// any field at all.
func metadataKeys(e metav1.ManagedFieldsEntry) (map[string]map[string]bool, bool, error) {
	set := &fieldpath.Set{}
	if err := set.FromJSON(e.FieldsV1.GetRawReader()); err != nil {
		return nil, false, err
	}
	metadata := "metadata"
	md := set.Children.Descend(fieldpath.PathElement{FieldName: &metadata})
	out := map[string]map[string]bool{}
	for _, field := range []string{"labels", "annotations"} {
		out[field] = map[string]bool{}
		md.Children.Descend(fieldpath.PathElement{FieldName: &field}).Members.Iterate(func(pe fieldpath.PathElement) {
			if pe.FieldName != nil {
				out[field][*pe.FieldName] = true
			}
		})
	}
	return out, !set.Empty(), nil
}

// applyChildren applies each child that is missing or not as rendered. A
// child the cache does not hold is created only when no object of that
// name exists or it is this parent's: stencil takes over nothing.
func (r *decoratorReconciler) applyChildren(ctx context.Context, parent client.Object, children []*unstructured.Unstructured) error {
	var errs []error
	for _, c := range children {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(c.GroupVersionKind())
		err := r.cache.Get(ctx, client.ObjectKeyFromObject(c), live)
		switch {
		case err == nil && !r.isChild(live, parent.GetUID()):
			errs = append(errs, notOurs(c))
			continue
		case err == nil && contains(live.Object, c.Object):
			continue
		case apierrors.IsNotFound(err):
			if taken, err := r.takenByOther(ctx, c, parent.GetUID()); err != nil || taken {
				errs = append(errs, err)
				continue
			}
		case err != nil:
			errs = append(errs, err)
			continue
		}
		if err := r.applyChild(ctx, c); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// takenByOther: an object named as child c exists and is not this parent's
// (told once in an event); the cache holds only the decorators' children.
func (r *decoratorReconciler) takenByOther(ctx context.Context, c *unstructured.Unstructured, uid types.UID) (bool, error) {
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(c.GroupVersionKind())
	err := r.reader.Get(ctx, client.ObjectKeyFromObject(c), live)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading %s %s: %w", c.GetKind(), client.ObjectKeyFromObject(c), err)
	}
	if r.isChild(live, uid) {
		return false, nil // ours, not cached yet
	}
	return true, notOurs(c)
}

// isChild: obj is a child of this decorator for the parent with uid, by
// two proofs (a label alone is easily copied): the decorator's and the
// owner-uid labels, and the parent's controller ownerReference.
func (r *decoratorReconciler) isChild(obj metav1.Object, uid types.UID) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	return obj.GetLabels()[v1alpha1.LabelDecorator] == r.dec.Name() && obj.GetLabels()[v1alpha1.LabelOwnerUID] == string(uid) && ref != nil && ref.UID == uid
}

func notOurs(c *unstructured.Unstructured) error {
	return fmt.Errorf("%s %s exists and is not this decorator's for this object: delete it, or rename the decorator's object", c.GetKind(), client.ObjectKeyFromObject(c))
}

func (r *decoratorReconciler) applyChild(ctx context.Context, c *unstructured.Unstructured) error {
	if _, err := r.forceApply(ctx, c); err != nil {
		return fmt.Errorf("applying %s %s: %w", c.GetKind(), client.ObjectKeyFromObject(c), err)
	}
	return nil
}

// forceApply server-side-applies obj with force under the decorator's field
// manager, counts it, and returns the metadata the API server answered.
func (r *decoratorReconciler) forceApply(ctx context.Context, obj *unstructured.Unstructured) (*metav1.PartialObjectMetadata, error) {
	raw, err := obj.MarshalJSON()
	if err != nil {
		return nil, err
	}
	target := &metav1.PartialObjectMetadata{}
	target.SetGroupVersionKind(obj.GroupVersionKind())
	target.SetName(obj.GetName())
	target.SetNamespace(obj.GetNamespace())
	opts := []client.PatchOption{client.FieldOwner(Manager(r.dec.Name())), client.ForceOwnership}
	if err := r.client.Patch(ctx, target, client.RawPatch(types.ApplyPatchType, raw), opts...); err != nil {
		return nil, err
	}
	engine.CountObjects(r.dec.Name(), 1, 0, 0)
	return target, nil
}

// prune deletes the children of parent (by the decorator's and the
// parent's labels) that keep is not rendering any more.
func (r *decoratorReconciler) prune(ctx context.Context, parent client.Object, keep []*unstructured.Unstructured) error {
	wanted := map[engine.ObjectID]bool{}
	for _, c := range keep {
		wanted[engine.IDOf(c)] = true
	}
	var errs []error
	for _, t := range r.dec.Declaration().Owns {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(t.GroupVersionKind().GroupVersion().WithKind(t.Kind + "List"))
		sel := client.MatchingLabels{v1alpha1.LabelDecorator: r.dec.Name(), v1alpha1.LabelOwnerUID: string(parent.GetUID())}
		if err := r.cache.List(ctx, list, sel); err != nil {
			errs = append(errs, fmt.Errorf("listing %s to prune: %w", t.Kind, err))
			continue
		}
		for i := range list.Items {
			item := &list.Items[i]
			if wanted[engine.NewID(t.GroupVersionKind(), item.GetNamespace(), item.GetName())] || !r.isChild(item, parent.GetUID()) {
				continue
			}
			uid := item.GetUID()
			err := r.client.Delete(ctx, item, client.Preconditions{UID: &uid})
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("pruning %s %s: %w", t.Kind, client.ObjectKeyFromObject(item), err))
				continue
			}
			engine.CountObjects(r.dec.Name(), 0, 1, 0)
		}
	}
	return errors.Join(errs...)
}

// contains reports whether every field of want is in have with the same
// value (lists compared whole): the rendered object is as applied.
func contains(have, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range w {
			if !contains(h[k], v) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !contains(h[i], w[i]) {
				return false
			}
		}
		return true
	default:
		return fmt.Sprint(have) == fmt.Sprint(want)
	}
}
