package render

import (
	"cmp"
	cryptorand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

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

// DecodeObjects reads a YAML stream of objects (as kubectl get -o yaml
// prints them: a List is unpacked) into a Snapshot.
func DecodeObjects(data []byte) (Objects, error) {
	docs, err := decode(data, func(int) error { return nil })
	if err != nil {
		return nil, err
	}
	var out Objects
	for _, o := range docs {
		if !o.IsList() {
			out = append(out, o)
			continue
		}
		err := o.EachListItem(func(item runtime.Object) error {
			out = append(out, item.(*unstructured.Unstructured))
			return nil
		})
		if err != nil {
			return nil, err
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
}

// FixedRandom is a source of the same values every time, for tests: what
// generate makes from it is known to anyone, so never for objects that are
// applied.
func FixedRandom() io.Reader { return rand.NewChaCha8([32]byte{}) }

// HasGraph reports whether the kind declares a graph or inputs.
func (k *Kind) HasGraph() bool { return k.graph != nil }

// Inputs are the kind's declared inputs, by name.
func (k *Kind) Inputs() map[string]Input {
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
		objs, err := k.render(obj, v)
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
		docs = k.withoutTests(docs)
		if scope.secretInput != "" {
			gr.secretInput[name] = scope.secretInput
		}
		for _, d := range docs {
			setSource(d, n.file)
			markNode(d, n, k.graph.stage[name])
			if err := k.finishObject(d, gr.owner, v, seen); err != nil {
				if scope.read != "" {
					return nil, &Error{File: n.file, Err: withheld(scope, err)} // a name may quote the data
				}
				return nil, err
			}
			if scope.secretInput != "" && !isSecret(d) {
				return nil, &Error{File: n.file, Err: fmt.Errorf("a %s: the template reads %s, so it may render only Secrets: a Secret's data must not reach an object that more people can read", d.GetKind(), scope.secretInput)}
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

// readiness of a rendered node: its live objects, and why it is not ready
// ("" when it is).
type readiness struct {
	live   []map[string]any
	why    string
	failed bool
}

type inputValue struct {
	value any
	why   string // a required input that is missing: what the node waits for
	err   error
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

// input resolves a declared input once per render: nil for an optional one
// that is missing, a WaitError for a required one.
func (gr *graphRun) input(name string) (any, error) {
	if v, ok := gr.inputs[name]; ok {
		return v.value, v.valueErr()
	}
	v := gr.resolve(gr.k.graph.inputs[name])
	gr.inputs[name] = v
	return v.value, v.valueErr()
}

func (v inputValue) valueErr() error {
	switch {
	case v.err != nil:
		return v.err
	case v.why != "":
		return &WaitError{For: v.why}
	}
	return nil
}

func (gr *graphRun) resolve(in *graphInput) inputValue {
	ns := cmp.Or(in.Namespace, gr.cr.GetNamespace())
	gvk := in.GroupVersionKind()
	if in.selector != "" {
		src, err := gr.run.rule(in.selector, gr.cr)
		if err != nil {
			return inputValue{err: fmt.Errorf("inputs: selector: %w", err)}
		}
		sel, err := labels.Parse(src)
		if err != nil {
			return inputValue{err: fmt.Errorf("inputs: selector %q: %w", src, err)}
		}
		if sel.Empty() {
			// Not "everything": a spec that gives no selector selects none.
			if in.Optional {
				return inputValue{value: []map[string]any{}}
			}
			return inputValue{why: "a selector for the input " + in.Kind + " (the spec gives none)"}
		}
		objs, err := gr.in.Inputs.List(gvk, ns, sel)
		if err != nil {
			return inputValue{err: &ReadError{fmt.Errorf("inputs: listing %s: %w", in.Kind, err)}}
		}
		slices.SortFunc(objs, func(a, b *unstructured.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })
		list := make([]map[string]any, 0, len(objs))
		for _, o := range objs {
			list = append(list, o.Object)
		}
		return inputValue{value: list}
	}
	name, err := gr.run.rule(in.name, gr.cr)
	if err != nil {
		return inputValue{err: fmt.Errorf("inputs: name: %w", err)}
	}
	if name == "" {
		if in.Optional {
			return inputValue{value: map[string]any{}}
		}
		return inputValue{why: "a name for the input " + in.Kind + " (the spec gives none)"}
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return inputValue{err: fmt.Errorf("inputs: %s name %q is not a valid name: %s", in.Kind, name, strings.Join(errs, "; "))}
	}
	o, err := gr.in.Inputs.Get(gvk, ns, name)
	switch {
	case err != nil:
		return inputValue{err: &ReadError{fmt.Errorf("inputs: reading %s %s/%s: %w", in.Kind, ns, name, err)}}
	case o == nil && in.Optional:
		return inputValue{value: map[string]any{}} // empty: with and dig work on it
	case o == nil:
		return inputValue{why: in.Kind + " " + ns + "/" + name + " to exist"}
	}
	return inputValue{value: o.Object}
}

// graphScope is what the graph functions of one node's execution read.
type graphScope struct {
	run  *graphRun
	node *graphNode
	// secretInput says how the node reads a Secret input's data (empty:
	// it does not): then it may render only Secrets.
	secretInput string
	// read says which Secret data the template has been given so far
	// (empty: none), a Secret input's or the graph's own Secrets': from
	// then on, its errors and waits are withheld. It binds the node to
	// nothing else (see Kind.SecretNode).
	read string
}

// object is the live object of a node before this one, which must render
// exactly one.
func (s *graphScope) object(name string) (map[string]any, error) {
	list, err := s.objects(name)
	if err != nil {
		return nil, err
	}
	if len(list) != 1 {
		return nil, fmt.Errorf("object %q: that node renders %d objects; use objects", name, len(list))
	}
	return list[0], nil
}

// objects are the live objects of a node before this one.
func (s *graphScope) objects(name string) ([]map[string]any, error) {
	if !slices.Contains(s.node.after, name) {
		return nil, fmt.Errorf("objects %q: not a node this one waits for", name)
	}
	if s.read == "" {
		s.read = s.run.secretData(name)
	}
	return s.run.readiness(name).live, nil
}

// secretData says what Secret data the objects of node name give a
// template that reads them ("" none): a Secret input's, which the node
// holds, or that of the Secrets it renders, the graph's own (generated,
// or adopted with a value a person chose). Kind.SecretNode judges by the
// same rules after the render.
func (gr *graphRun) secretData(name string) string {
	if held := gr.secretInput[name]; held != "" {
		return fmt.Sprintf("node %q, which holds %s", name, held)
	}
	if slices.ContainsFunc(gr.rendered[name], isSecret) {
		return fmt.Sprintf("a Secret of node %q", name)
	}
	return ""
}

func (s *graphScope) input(name string) (any, error) {
	if !slices.Contains(s.node.reads, name) {
		return nil, fmt.Errorf("input %q: not declared", name)
	}
	v, err := s.run.input(name)
	if err == nil && s.run.k.graph.inputs[name].secret() && s.read == "" {
		s.read = fmt.Sprintf("the Secret input %q", name)
	}
	return v, err
}

// need is the value at a dotted path of obj; when it is missing or empty
// the node waits for it. The value itself is never in the message, but the
// path and obj's name are, and either may be made from Secret data: after
// a read of it, the message is withheld (see graphScope.waitsFor).
func need(path string, obj any) (any, error) {
	m, _ := obj.(map[string]any)
	what := "the object"
	if m != nil {
		u := unstructured.Unstructured{Object: m}
		what = u.GetKind() + " " + u.GetName()
	}
	v := any(m)
	for key := range strings.SplitSeq(path, ".") {
		next, ok := v.(map[string]any)
		if !ok {
			v = nil
			break
		}
		v = next[key]
	}
	if empty(v) {
		return nil, &WaitError{For: what + " to have " + path}
	}
	return v, nil
}

func empty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case map[string]any:
		return len(v) == 0
	case []any:
		return len(v) == 0
	}
	return false
}

// alphanumerics are generate's characters.
const alphanumerics = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// generate is n random letters and digits from the render's source, for a
// createOnly node (only the first render's value is ever applied).
func (s *graphScope) generate(n int) (string, error) {
	if n < 1 || n > 4096 {
		return "", fmt.Errorf("generate %d: the length must be 1 to 4096", n)
	}
	out := make([]byte, 0, n)
	buf := make([]byte, n)
	// Bytes of 248 and more are dropped: 248 is the largest multiple of
	// 62 below 256, so every character is as likely.
	const unbiased = 256 - 256%len(alphanumerics)
	for len(out) < n {
		if _, err := io.ReadFull(s.run.in.Random, buf); err != nil {
			return "", fmt.Errorf("generate: %w", err)
		}
		for _, b := range buf {
			if int(b) < unbiased && len(out) < n {
				out = append(out, alphanumerics[int(b)%len(alphanumerics)])
			}
		}
	}
	return string(out), nil
}

// graphFuncs are the graph functions of an execution whose budget b
// carries the scope; outside a graph kind's node they fail.
func graphFuncs(b *budget) map[string]any {
	scope := func(fn string) (*graphScope, error) {
		if b.scope == nil {
			return nil, fmt.Errorf("%s: only a graph kind's templates may call it (declare graph or inputs in %s)", fn, declarationFile)
		}
		return b.scope, nil
	}
	return map[string]any{
		fnObject: func(name string) (map[string]any, error) {
			s, err := scope(fnObject)
			if err != nil {
				return nil, err
			}
			return s.object(name)
		},
		fnObjects: func(name string) ([]map[string]any, error) {
			s, err := scope(fnObjects)
			if err != nil {
				return nil, err
			}
			return s.objects(name)
		},
		fnInput: func(name string) (any, error) {
			s, err := scope(fnInput)
			if err != nil {
				return nil, err
			}
			return s.input(name)
		},
		fnGenerate: func(n int) (string, error) {
			s, err := scope(fnGenerate)
			if err != nil {
				return "", err
			}
			return s.generate(n)
		},
	}
}

// graphFuncStubs declare the graph functions at parse time.
func graphFuncStubs() map[string]any {
	return graphFuncs(&budget{})
}
