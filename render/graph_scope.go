package render

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// What a graph node's template reads: the kind's inputs, and the objects
// of the nodes it depends on (its scope), through the graph functions.

type inputValue struct {
	value any
	why   string // a required input that is missing: what the node waits for
	err   error
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
