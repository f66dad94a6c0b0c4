package render

import (
	cryptorand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// Snapshot is what a graph kind's render reads besides its custom resource:
// the live objects, as the cache holds them at run time, or a file offline.
// Get returns nil, nil when the object does not exist.
type Snapshot interface {
	Get(gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error)
	List(gvk schema.GroupVersionKind, namespace string, selector labels.Selector) ([]*unstructured.Unstructured, error)
}

// Objects is a Snapshot of the objects it holds.
type Objects []*unstructured.Unstructured

// Get implements Snapshot.
func (s Objects) Get(gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	for _, o := range s {
		if o.GroupVersionKind() == gvk && o.GetNamespace() == namespace && o.GetName() == name {
			return o, nil
		}
	}
	return nil, nil
}

// List implements Snapshot.
func (s Objects) List(gvk schema.GroupVersionKind, namespace string, selector labels.Selector) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, o := range s {
		if o.GroupVersionKind() == gvk && o.GetNamespace() == namespace && selector.Matches(labels.Set(o.GetLabels())) {
			out = append(out, o)
		}
	}
	return out, nil
}

// Plan is a graph kind's render: the objects of the nodes whose turn has
// come, and why the others wait. A kind without a graph renders every
// object and waits for nothing.
type Plan struct {
	Objects []*unstructured.Unstructured
	// Waiting are the nodes not rendered, in graph order.
	Waiting []Waiting
	// Once are the rendered nodes declared once, each with the digest of
	// its objects: what status.once records once they are applied.
	Once []v1alpha1.OnceApplied
	// Done are the objects of nodes declared once that were applied for
	// the same digest and are gone: not made again, and not pruned should
	// they still be seen.
	Done []*unstructured.Unstructured
}

// Waiting is a node that was not rendered: what it waits for.
type Waiting struct {
	Node string
	// Stage is the node's place in the graph (0: it waits for no node).
	Stage int
	For   string
	// Failed: an object it waits for has failed by the kstatus rules (a
	// Job past its backoff limit); it will not get ready by waiting.
	Failed bool
}

func (w Waiting) String() string { return w.Node + " waits for " + w.For }

// Read is an input a render looked for: one object by name, or the objects
// a selector matches.
type Read struct {
	GVK       schema.GroupVersionKind
	Namespace string
	Name      string
	Selector  labels.Selector
}

// Matches reports whether the object namespace/name with these labels is
// (or would be) what r reads.
func (r Read) Matches(gvk schema.GroupVersionKind, namespace, name string, set map[string]string) bool {
	if gvk != r.GVK || namespace != r.Namespace {
		return false
	}
	if r.Selector != nil {
		return r.Selector.Matches(labels.Set(set))
	}
	return name == r.Name
}

// GraphInput is what RenderGraph reads besides the custom resource.
type GraphInput struct {
	// Live holds the resource's live objects (nil: none).
	Live Snapshot
	// Inputs is where the declared inputs are read (nil: Live).
	Inputs Snapshot
	// Random is where generate takes its values (nil: crypto/rand; tests
	// give FixedRandom, so that their output is repeatable).
	Random io.Reader
	// Generated are the values a chart kind's templates generated for
	// the resource before, which the render reads and adds to (nil: a
	// render offline, whose values are made from a fixed source, or are
	// placeholders).
	Generated *Generated
}

// FixedRandom is a source of the same values every time, for tests: what
// generate makes from it is known to anyone, so never for objects that are
// applied.
func FixedRandom() io.Reader { return rand.NewChaCha8([32]byte{}) }

// Inputs are the kind's declared inputs, by name.
func (g *Graph) Inputs() map[string]Input {
	if g == nil {
		return nil
	}
	k := g.k
	if k.graph == nil {
		return nil
	}
	out := map[string]Input{}
	for name, in := range k.graph.inputs {
		out[name] = in.Input
	}
	return out
}

// Stage is the place in the kind's graph of the node an object was
// rendered by, from its annotation (-1 when it has none): deletion goes
// from the highest stage down.
func Stage(o interface{ GetAnnotations() map[string]string }) int {
	s, err := strconv.Atoi(o.GetAnnotations()[v1alpha1.AnnotationGraphStage])
	if err != nil {
		return -1
	}
	return s
}

// RenderGraph renders the nodes of a graph kind in order: a node whose
// dependencies are not all ready, or whose template needs a value or an
// input that is not there yet, is not rendered, and the plan says what it
// waits for. Objects are checked and stamped as Render does. It is pure: a
// function of the resource and the snapshot.
func (k *Kind) RenderGraph(obj v1alpha1.Object, in GraphInput) (*Plan, error) {
	return k.renderGraph(obj, in, nil)
}

// RenderGraphValidated is RenderGraph, checking every object with v.
func (k *Kind) RenderGraphValidated(obj v1alpha1.Object, in GraphInput, v Validator) (*Plan, error) {
	return k.renderGraph(obj, in, v)
}

func (k *Kind) renderGraph(obj v1alpha1.Object, in GraphInput, v Validator) (*Plan, error) {
	if k.graph == nil {
		objs, err := k.render(obj, in, v)
		if err != nil {
			return nil, err
		}
		return &Plan{Objects: objs}, nil
	}
	if in.Live == nil {
		in.Live = Objects(nil)
	}
	if in.Inputs == nil {
		in.Inputs = in.Live
	}
	if in.Random == nil {
		in.Random = cryptorand.Reader
	}
	run, err := k.execution(k.limits.Bytes, "rendered bytes")
	if err != nil {
		return nil, err
	}
	defer k.runs.put(run)
	defer func() { run.b.scope = nil }()
	k.startRender(run, obj, in)
	gr := &graphRun{k: k, run: run, cr: obj, in: in, owner: newOwner(k.ownerGVK(), obj),
		rendered: map[string][]*unstructured.Unstructured{}, ready: map[string]readiness{},
		inputs: map[string]inputValue{}, secretInput: map[string]string{}, plan: &Plan{}}
	seen := map[string]bool{}
	for _, name := range k.graph.order {
		n := k.graph.nodes[name]
		if why, failed := gr.blocked(n); why != "" {
			gr.wait(n, why, failed)
			continue
		}
		scope := &graphScope{run: gr, node: n}
		if len(n.secretInput) > 0 {
			scope.secretInput = n.secretInput[0]
		}
		run.b.scope = scope
		out, err := k.executeFile(run, n.file, obj)
		if w, ok := errors.AsType[*WaitError](err); ok {
			gr.wait(n, scope.waitsFor(w), w.Failed)
			continue
		}
		if r, ok := errors.AsType[*ReadError](err); ok {
			return nil, &Error{File: n.file, Err: r} // made of names, never of what a template read
		}
		if err != nil {
			return nil, &Error{File: n.file, Err: withheld(scope, err)}
		}
		docs, err := decode(out, run.within(k.limits, len(gr.plan.Objects)))
		if err != nil {
			return nil, &Error{File: n.file, Err: withheld(scope, err)}
		}
		docs = k.chart.withoutTests(docs)
		if scope.secretInput != "" {
			gr.secretInput[name] = scope.secretInput
		}
		if err := gr.finishNode(scope, docs, v, seen); err != nil {
			return nil, err
		}
		if n.Once {
			if docs, err = gr.once(n, docs); err != nil {
				return nil, err
			}
		}
		gr.rendered[name] = docs
		gr.plan.Objects = append(gr.plan.Objects, docs...)
	}
	if gr.limit != nil {
		return nil, gr.limit
	}
	slices.SortFunc(gr.plan.Objects, func(a, b *unstructured.Unstructured) int { return strings.Compare(objectID(a), objectID(b)) })
	return gr.plan, nil
}

// finishNode checks and stamps the objects a node rendered, as Render
// does, and marks them with the node.
func (gr *graphRun) finishNode(scope *graphScope, docs []*unstructured.Unstructured, v Validator, seen map[string]bool) error {
	k, n := gr.k, scope.node
	for _, d := range docs {
		setSource(d, n.file)
		if err := k.written.check(d); err != nil {
			return err
		}
		markNode(d, n, k.graph.stage[n.name])
		if err := k.finishObject(d, gr.owner, v, seen); err != nil {
			if scope.read != "" {
				return &Error{File: n.file, Err: withheld(scope, err)} // a name may quote the data
			}
			return err
		}
		if scope.secretInput != "" && !isSecret(d) {
			return &Error{File: n.file, Err: fmt.Errorf("a %s: the template reads %s, so it may render only Secrets: a Secret's data must not reach an object that more people can read", d.GetKind(), scope.secretInput)}
		}
	}
	return nil
}

// once leaves out of a once node's objects those that are gone after the
// node was done at the same digest (status.once; Plan.Done): they are not
// made again. It records the node in Plan.Once when it is done now: so
// recorded before, or its objects seen live and ready (a Job complete).
// A node whose objects failed, or went before stencil saw them ready, is
// not done: they are made again.
func (gr *graphRun) once(n *graphNode, docs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	record := v1alpha1.OnceApplied{Node: n.name, Digest: onceDigest(docs)}
	done := slices.Contains(gr.cr.StencilStatus().Once, record)
	var kept []*unstructured.Unstructured
	for _, d := range docs {
		live, err := gr.in.Live.Get(d.GroupVersionKind(), d.GetNamespace(), d.GetName())
		if err != nil {
			return nil, &Error{File: n.file, Err: &ReadError{Err: err}}
		}
		if live == nil && done {
			gr.plan.Done = append(gr.plan.Done, d)
			continue
		}
		kept = append(kept, d)
	}
	gr.rendered[n.name] = kept
	if done || gr.readiness(n.name).why == "" {
		gr.plan.Once = append(gr.plan.Once, record)
	}
	return kept, nil
}

// onceDigest is the digest of what a node's objects are, stencil's own
// labels, annotations and owner references left out (a resource moving
// to another shard does not run its hooks again).
func onceDigest(docs []*unstructured.Unstructured) string {
	ids := make([]string, len(docs))
	for i, d := range docs {
		c := d.DeepCopy()
		c.SetOwnerReferences(nil)
		c.SetLabels(withoutStencilKeys(c.GetLabels()))
		c.SetAnnotations(withoutStencilKeys(c.GetAnnotations()))
		data, _ := json.Marshal(c.Object) // a rendered object marshals
		ids[i] = string(data)
	}
	slices.Sort(ids)
	sum := sha256.Sum256([]byte(strings.Join(ids, "\n")))
	return hex.EncodeToString(sum[:8])
}

// withoutStencilKeys is m without stencil's keys (stencil.dev/…).
func withoutStencilKeys(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if !strings.HasPrefix(k, "stencil.dev/") {
			out[k] = v
		}
	}
	return out
}

// OnceMinTTL is the least a once node's Job is kept after it finishes, in
// seconds: a ttlSecondsAfterFinished under it is raised to it, so that
// stencil sees how the Job ended before the TTL controller removes it.
const OnceMinTTL = 15

// keepFinishedJob raises a once node's Job's ttlSecondsAfterFinished to
// OnceMinTTL.
func keepFinishedJob(o *unstructured.Unstructured) {
	if o.GroupVersionKind().GroupKind() != (schema.GroupKind{Group: "batch", Kind: "Job"}) {
		return
	}
	if ttl, found, _ := unstructured.NestedInt64(o.Object, "spec", "ttlSecondsAfterFinished"); found && ttl < OnceMinTTL {
		_ = unstructured.SetNestedField(o.Object, int64(OnceMinTTL), "spec", "ttlSecondsAfterFinished")
	}
}

// markNode records on o the node that rendered it and its stage; a
// createOnly node's objects are created once and never updated.
func markNode(o *unstructured.Unstructured, n *graphNode, stage int) {
	ann := o.GetAnnotations()
	ann[v1alpha1.AnnotationGraphNode] = n.name
	ann[v1alpha1.AnnotationGraphStage] = strconv.Itoa(stage)
	if n.CreateOnly {
		ann[v1alpha1.AnnotationSSA] = v1alpha1.SSAIfNotPresent
	}
	o.SetAnnotations(ann)
	if n.Once {
		keepFinishedJob(o)
	}
}

// WaitError stops a node's render: a value it needs is not there yet.
type WaitError struct {
	For string
	// Failed: what it waits for has failed (kstatus), and waiting will not
	// change that.
	Failed bool
}

func (e *WaitError) Error() string { return "waits for " + e.For }

// graphRun is one graph render's state.
type graphRun struct {
	k *Kind
	// run is the render's execution: the readyWhen rules and the inputs'
	// name and selector templates run in it too, within its limits.
	run *execution
	// limit is the first limit a readyWhen rule went over: the render
	// fails with it.
	limit    error
	cr       v1alpha1.Object
	in       GraphInput
	owner    owner
	rendered map[string][]*unstructured.Unstructured
	ready    map[string]readiness
	inputs   map[string]inputValue
	// secretInput: the nodes rendered from a Secret input's data, and
	// how (see graphNode.secretInput).
	secretInput map[string]string
	plan        *Plan
}

func (gr *graphRun) wait(n *graphNode, why string, failed bool) {
	gr.plan.Waiting = append(gr.plan.Waiting, Waiting{Node: n.name, Stage: gr.k.graph.stage[n.name], For: why, Failed: failed})
}

// ReadError is a failure to read the live objects or inputs a render
// needs: retried, unlike a template's error.
type ReadError struct{ Err error }

func (e *ReadError) Error() string { return e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }

// withheld is err, unless the node's template has read Secret data: then
// any error (a template's, which may quote the values it was given, a
// name's, a limit's) is replaced by a fixed one that names what it read and
// says where to see the message, never a value or a length. A limit's error
// stays a *LimitError underneath, so that it keeps its reason. A ReadError
// is not withheld: it is made of the input's declaration, names from the
// custom resource and the cache's error, never of what a template read.
func withheld(s *graphScope, err error) error {
	if s.read == "" {
		return err
	}
	held := &heldError{msg: "the template failed after it read " + s.read + "; its message is withheld, as it may quote the data: " + seeWithheld}
	if limit, ok := errors.AsType[*LimitError](err); ok {
		held.limit = &LimitError{Limit: limit.Limit, Max: limit.Max}
	}
	return held
}

// seeWithheld says where to see a withheld message.
const seeWithheld = "run stencil render --observed with the objects to see it"

// heldError is an error withheld after a read of Secret data: a fixed
// message, and the limit that stopped the render, if one did.
type heldError struct {
	msg   string
	limit *LimitError
}

func (e *heldError) Error() string { return e.msg }

func (e *heldError) Unwrap() error {
	if e.limit == nil {
		return nil
	}
	return e.limit
}

// waitsFor is what w says the node waits for, unless its template has read
// Secret data: a path or an object given to need may be made from the
// data, so a fixed message stands in.
func (s *graphScope) waitsFor(w *WaitError) string {
	if s.read == "" {
		return w.For
	}
	return "a value its template needs after it read " + s.read + " (withheld, as it may quote the data: " + seeWithheld + ")"
}

// alphanumerics are generate's characters.
const alphanumerics = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
