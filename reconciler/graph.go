package reconciler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/reconciler/engine"
	"github.com/stencil-operator/stencil/render"
)

// A graph kind (render.Kind.Graph) renders its templates in the order its
// _kind.yaml declares: each reconcile renders the nodes whose dependencies
// are ready in the cache, applies them, and keeps the objects of the nodes
// that wait as they are. The objects' own events bring the resource back
// when a gate may open: a closed gate costs no request. Inputs (objects the
// kind reads but does not own) are read from the API server at each render,
// as the resource's ServiceAccount when one writes its objects, and watched
// metadata-only so that a change renders the resources that read them.

// failedNodeReads are the reads of the inputs that the template which
// failed with err reads (every read, when err names no template).
func (r *Reconciler) failedNodeReads(cr v1alpha1.Object, err error, reads []render.Read) []render.Read {
	failed, ok := errors.AsType[*render.Error](err)
	if !ok {
		return reads
	}
	var out []render.Read
	seen := map[string]bool{}
	for _, in := range r.kind().Graph().NodeInputs(failed.File) {
		ns := cmp.Or(in.Namespace, cr.GetNamespace())
		for _, read := range reads {
			if what := describeRead(read); read.GVK == in.GroupVersionKind() && read.Namespace == ns && !seen[what] {
				seen[what] = true
				out = append(out, read)
			}
		}
	}
	return out
}

// readLog is a render's Snapshot that logs what the render reads. Each
// read is registered for the watch (watch, when set) before it is made: a
// change that lands after the read still finds the resource among its
// readers.
type readLog struct {
	render.Snapshot
	watch func(render.Read)
	reads []render.Read
	n     int // reads made
}

func (l *readLog) Get(gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	l.note(render.Read{GVK: gvk, Namespace: namespace, Name: name})
	return l.Snapshot.Get(gvk, namespace, name)
}

func (l *readLog) List(gvk schema.GroupVersionKind, namespace string, selector labels.Selector) ([]*unstructured.Unstructured, error) {
	l.note(render.Read{GVK: gvk, Namespace: namespace, Selector: selector})
	return l.Snapshot.List(gvk, namespace, selector)
}

func (l *readLog) note(read render.Read) {
	l.n++
	if l.watch == nil {
		return
	}
	l.watch(read)
	l.reads = append(l.reads, read)
}

// readFailure is a failed render of a graph kind that read inputs or the
// live objects of its nodes before it failed: the template may have failed
// on what it read (a ConfigMap without the key it ranges over), so a
// change of those renders the resource again, and status names the inputs.
type readFailure struct {
	err    error
	inputs []render.Read
}

func (e *readFailure) Error() string {
	if len(e.inputs) == 0 {
		return e.err.Error() + " (the template read the live objects of the nodes before it: a change of them renders the resource again)"
	}
	what := firstFew(len(e.inputs), func(i int) string { return describeRead(e.inputs[i]) }, ", ", " ")
	return e.err.Error() + " (the template reads " + what + ": a change of it renders the resource again)"
}

func (e *readFailure) Unwrap() error { return e.err }

// describeRead names what a read looked for, as kubectl would.
func describeRead(r render.Read) string {
	if r.Selector != nil {
		return r.GVK.Kind + " in " + r.Namespace + " with labels " + r.Selector.String()
	}
	return r.GVK.Kind + " " + r.Namespace + "/" + r.Name
}

// inputReader reads a resource's inputs: as the ServiceAccount that writes
// its objects, when one does (a resource's author can then read, through
// stencil, only what that ServiceAccount may read), else as stencil,
// uncached.
func (r *Reconciler) inputReader(cr v1alpha1.Object) client.Reader {
	sa := r.identities.serviceAccount(r.kind().GroupVersionKind().Kind)
	if sa == "" || r.tenants == nil {
		return r.reader
	}
	c, err := r.tenants.client(cr.GetNamespace(), sa, r.client)
	if err != nil {
		return failingReader{err}
	}
	return c
}

// inputIdentity names who reads cr's inputs: its ServiceAccount, or "" for
// stencil.
func (r *Reconciler) inputIdentity(cr v1alpha1.Object) string {
	sa := r.identities.serviceAccount(r.kind().GroupVersionKind().Kind)
	if sa == "" || r.tenants == nil {
		return ""
	}
	return serviceAccountUser(cr.GetNamespace(), sa)
}

// cachedSnapshot reads a resource's own objects from the cache (a graph
// kind's owned types are cached whole).
type cachedSnapshot struct {
	ctx   context.Context
	c     client.Reader
	types engine.CachedTypes
}

func (s cachedSnapshot) Get(gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	obj := s.types.NewObject(gvk)
	err := s.c.Get(s.ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	m, err := engine.ObjectMap(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

func (s cachedSnapshot) List(schema.GroupVersionKind, string, labels.Selector) ([]*unstructured.Unstructured, error) {
	return nil, fmt.Errorf("a graph's own objects are read by name")
}

// ReadSnapshot is a render.Snapshot that reads the objects through c (the
// API server, or a cache): what `stencil render --live` and `stencil diff`
// give a graph kind's render.
func ReadSnapshot(ctx context.Context, c client.Reader) render.Snapshot {
	return readSnapshot{ctx: ctx, c: c}
}

// readSnapshot reads inputs from the API server, as who. An input the
// cache of their metadata shows unchanged since who last read it is served
// from memo: a resource rendered again costs no read of an input that did
// not change.
type readSnapshot struct {
	ctx  context.Context
	c    client.Reader
	who  string
	meta client.Reader // nil: no cache of the inputs' metadata
	memo *inputMemo
}

func (s readSnapshot) Get(gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	key := memoKey{who: s.who, memoObject: memoObject{gvk: gvk, namespace: namespace, name: name}}
	version := ""
	if s.meta != nil && s.memo != nil {
		m := metadataOf(gvk)
		if err := s.meta.Get(s.ctx, client.ObjectKey{Namespace: namespace, Name: name}, m); err == nil {
			version = m.GetResourceVersion()
			if o := s.memo.get(key, version); o != nil {
				return o, nil
			}
		}
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err := s.c.Get(s.ctx, client.ObjectKey{Namespace: namespace, Name: name}, u)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if s.memo != nil && version != "" && u.GetResourceVersion() == version {
		s.memo.put(key, u)
	}
	return u, nil
}

// inputMemo keeps the inputs as last read, by who read them (a
// ServiceAccount's read is never served to another), at the version read,
// for accessTTL: a read that RBAC no longer allows is not served longer
// than an answer that it may write is trusted. Entries older than that are
// swept as new ones come, and an input's are dropped when it is deleted.
type inputMemo struct {
	mu      sync.Mutex
	objects map[memoObject]map[string]memoized // by who
	swept   time.Time
}

type memoObject struct {
	gvk             schema.GroupVersionKind
	namespace, name string
}

type memoKey struct {
	who string
	memoObject
}

type memoized struct {
	object *unstructured.Unstructured
	at     time.Time
}

// get is a copy of the object read as key at version, nil when none is kept.
func (m *inputMemo) get(key memoKey, version string) *unstructured.Unstructured {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.objects[key.memoObject][key.who]
	if !ok || e.object.GetResourceVersion() != version || time.Since(e.at) > accessTTL {
		return nil
	}
	return e.object.DeepCopy() // templates may change what they are given (sprig's set)
}

func (m *inputMemo) put(key memoKey, o *unstructured.Unstructured) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	if m.objects == nil {
		m.objects = map[memoObject]map[string]memoized{}
	}
	if now.Sub(m.swept) > accessTTL {
		m.sweep(now)
	}
	if m.objects[key.memoObject] == nil {
		m.objects[key.memoObject] = map[string]memoized{}
	}
	c := o.DeepCopy()
	c.SetManagedFields(nil) // no template reads them
	m.objects[key.memoObject][key.who] = memoized{object: c, at: now}
}

// sweep drops the entries that get would no longer serve.
func (m *inputMemo) sweep(now time.Time) {
	m.swept = now
	for obj, byWho := range m.objects {
		for who, e := range byWho {
			if now.Sub(e.at) > accessTTL {
				delete(byWho, who)
			}
		}
		if len(byWho) == 0 {
			delete(m.objects, obj)
		}
	}
}

// forget drops what is kept of an input that was deleted.
func (m *inputMemo) forget(gvk schema.GroupVersionKind, namespace, name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objects, memoObject{gvk: gvk, namespace: namespace, name: name})
}

func (s readSnapshot) List(gvk schema.GroupVersionKind, namespace string, selector labels.Selector) ([]*unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := s.c.List(s.ctx, list, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out, nil
}

// failingReader fails every read with err.
type failingReader struct{ err error }

func (f failingReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return f.err
}

func (f failingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return f.err
}

// inputReads remembers, per resource, the inputs its last render read, so
// that an input's event renders those resources again. They are indexed
// by type and namespace: an event of an object no one reads costs a map
// lookup.
type inputReads struct {
	mu    sync.Mutex
	reads map[types.NamespacedName][]render.Read
	where map[inputPlace]map[types.NamespacedName]bool
}

type inputPlace struct {
	gvk       schema.GroupVersionKind
	namespace string
}

func (w *inputReads) set(nn types.NamespacedName, reads []render.Read) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.reads[nn] {
		p := inputPlace{r.GVK, r.Namespace}
		delete(w.where[p], nn)
		if len(w.where[p]) == 0 {
			delete(w.where, p)
		}
	}
	delete(w.reads, nn)
	for _, r := range reads {
		w.addLocked(nn, r)
	}
}

func (w *inputReads) forget(nn types.NamespacedName) { w.set(nn, nil) }

// add registers one more read of nn's, until the next set.
func (w *inputReads) add(nn types.NamespacedName, read render.Read) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.addLocked(nn, read)
}

func (w *inputReads) addLocked(nn types.NamespacedName, read render.Read) {
	if w.reads == nil {
		w.reads, w.where = map[types.NamespacedName][]render.Read{}, map[inputPlace]map[types.NamespacedName]bool{}
	}
	w.reads[nn] = append(w.reads[nn], read)
	p := inputPlace{read.GVK, read.Namespace}
	if w.where[p] == nil {
		w.where[p] = map[types.NamespacedName]bool{}
	}
	w.where[p][nn] = true
}

// readers are the resources whose last render read (or looked for) the
// object of type gvk.
func (w *inputReads) readers(gvk schema.GroupVersionKind, obj client.Object) []reconcile.Request {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []reconcile.Request
	for nn := range w.where[inputPlace{gvk, obj.GetNamespace()}] {
		if slices.ContainsFunc(w.reads[nn], func(r render.Read) bool {
			return r.Matches(gvk, obj.GetNamespace(), obj.GetName(), obj.GetLabels())
		}) {
			out = append(out, reconcile.Request{NamespacedName: nn})
		}
	}
	return out
}

// waitMessage says which nodes of the graph wait, and for what. Its first
// part names them (waitingNodes reads it back).
func waitMessage(rendered int, waiting []render.Waiting) string {
	var b strings.Builder
	names := make([]string, len(waiting))
	for i, w := range waiting {
		names[i] = w.Node
	}
	b.WriteString("The objects of the nodes whose turn has come (" + strconv.Itoa(rendered) + ") are applied; ")
	b.WriteString(strconv.Itoa(len(waiting)) + " of the graph's nodes wait (" + strings.Join(names, ", ") + "): ")
	b.WriteString(firstFew(len(waiting), func(i int) string { return waiting[i].String() }, "; ", "; "))
	b.WriteString(". Their objects, if any, are kept as they are; stencil renders them when what they wait for changes.")
	return b.String()
}

// deleteInOrder deletes a graph kind's objects before its resource goes,
// from the last stage of the graph to the first, as the objects' stage
// annotations say (never by rendering again): the objects of one stage are
// deleted once those of every later stage are gone. Objects without a
// stage go first. While some are left it returns a *stageLeft error.
func (r *Reconciler) deleteInOrder(ctx context.Context, cr v1alpha1.Object) ([]v1alpha1.InventoryEntry, error) {
	type found struct {
		gvk  schema.GroupVersionKind
		item client.Object
	}
	var left []found
	top := math.MinInt
	for _, gvk := range r.applier.PruneTypes(cr, false) {
		items, err := r.applier.ListToPrune(ctx, cr, gvk, true)
		if err != nil {
			return nil, fmt.Errorf("listing %s to delete: %w", gvk.Kind, err)
		}
		for _, item := range items {
			if item.GetAnnotations()[v1alpha1.AnnotationPrune] == v1alpha1.PruneDisabled || !r.applier.OwnedBy(item, cr) {
				continue
			}
			left = append(left, found{gvk, item})
			top = max(top, deletionStage(item))
		}
	}
	if len(left) == 0 {
		return nil, nil
	}
	var deleted []v1alpha1.InventoryEntry
	going := &stageLeft{stage: top}
	for _, f := range left {
		if deletionStage(f.item) != top {
			continue
		}
		going.add(f.gvk.Kind, f.item)
		if f.item.GetDeletionTimestamp() != nil {
			continue
		}
		// Foreground: the object stays until its dependents are gone (a
		// Deployment's pods), so that the stage before it outlives them. A
		// stencil resource with a finalizer of its own (a graph kind's)
		// orders its own deletion, and refuses a foreground one.
		policy := metav1.DeletePropagationForeground
		if slices.Contains(f.item.GetFinalizers(), finalizer) {
			policy = metav1.DeletePropagationBackground
		}
		if err := r.applier.DeleteOwned(ctx, cr, f.gvk, f.item, policy); err != nil {
			return deleted, err
		}
		deleted = append(deleted, v1alpha1.InventoryEntry{APIVersion: f.gvk.GroupVersion().String(), Kind: f.gvk.Kind, Namespace: f.item.GetNamespace(), Name: f.item.GetName()})
	}
	ctrl.LoggerFrom(ctx).Info("Deleting a graph's objects in reverse order; waiting for this stage to go", "stage", top, "objects", len(going.objects), "cr", klog.KObj(cr))
	return deleted, going
}

// stageLeft is the error of a deletion in reverse order that waits for
// the objects of one stage to go.
type stageLeft struct {
	stage   int
	objects []string
}

func (e *stageLeft) add(kind string, o client.Object) {
	what := kind + " " + o.GetName()
	if f := o.GetFinalizers(); len(f) > 0 && o.GetDeletionTimestamp() != nil {
		what += " (finalizers: " + strings.Join(f, ", ") + ")"
	}
	e.objects = append(e.objects, what)
}

func (e *stageLeft) Error() string {
	stage := "stage " + strconv.Itoa(e.stage)
	if e.stage == math.MaxInt {
		stage = "the objects without a stage"
	}
	what := firstFew(len(e.objects), func(i int) string { return e.objects[i] }, ", ", " ")
	return "stencil deletes the objects in the reverse order of the graph, " + stage + " first, and waits for them to go: " + what
}

// deletionStage is an object's stage for deletion: objects without one
// (rendered before the kind had a graph) go first.
func deletionStage(o metav1.Object) int {
	if s := render.Stage(o); s >= 0 {
		return s
	}
	return math.MaxInt
}
