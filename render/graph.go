package render

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/template"
	"text/template/parse"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Node is one template of a graph kind, as _kind.yaml's graph declares it.
// A node is named after its file without ".yaml"; every template of a graph
// kind is a node, declared or not.
type Node struct {
	// After are the nodes whose objects must all be ready before this
	// node's template is rendered at all. Nodes whose objects the template
	// reads (object "name") are added to them.
	After []string `json:"after,omitempty"`
	// ReadyWhen are templates run on each live object of the node (its
	// data is the object, as a map); the object is ready when every one
	// writes "true". The kstatus rules must call it current too.
	ReadyWhen []string `json:"readyWhen,omitempty"`
	// CreateOnly objects are created once and never updated: the place for
	// generated values (the generate function), read back from the live
	// object by the nodes after it.
	CreateOnly bool `json:"createOnly,omitempty"`
	// Once: the node's objects are made once for what the template
	// renders, as Helm runs a hook once per release. Once stencil has
	// applied them (status.once records it), an object of the node that is
	// gone (a Job its ttlSecondsAfterFinished removed, a hook its delete
	// policy removed, one someone deleted) is not made again, and counts
	// as ready for the nodes after it, until the template renders the
	// node's objects differently.
	Once bool `json:"once,omitempty"`
}

// Input is an object a graph kind reads but does not own, declared in
// _kind.yaml under inputs: one object by name, or a list by label selector.
type Input struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Resource is the plural resource name, for RBAC (default: the
	// kind's regular plural, see [Plural]).
	Resource string `json:"resource,omitempty"`
	// Name is a template over the custom resource that writes the object's
	// name. Empty output: no object (an optional input is then nil).
	Name string `json:"name,omitempty"`
	// Selector is a template over the custom resource that writes a label
	// selector; the input is then the list of matching objects.
	Selector string `json:"selector,omitempty"`
	// Namespace is where the object is read: the custom resource's own
	// namespace unless the kind's author fixes another one here. It is
	// never taken from the spec.
	Namespace string `json:"namespace,omitempty"`
	// Optional: a missing object is an empty map (with, dig and default
	// treat it as absent) rather than a wait.
	Optional bool `json:"optional,omitempty"`
}

// GroupVersionKind of the input's type.
func (in Input) GroupVersionKind() schema.GroupVersionKind {
	return schema.FromAPIVersionAndKind(in.APIVersion, in.Kind)
}

// TypeRef is the input's type, for RBAC and the cache.
func (in Input) TypeRef() TypeRef {
	return TypeRef{APIVersion: in.APIVersion, Kind: in.Kind, Resource: in.Resource}
}

// secret: the input is a Secret, whose data may flow only into Secrets.
func (in Input) secret() bool {
	gvk := in.GroupVersionKind()
	return gvk.Group == "" && gvk.Kind == "Secret"
}

// graph is a graph kind's compiled declaration.
type graph struct {
	// order is every node, dependencies first; stage is each node's depth
	// (0 for a node that waits for none).
	order []string
	stage map[string]int
	nodes map[string]*graphNode
	// inputs by name, with their name and selector templates parsed.
	inputs map[string]*graphInput
	// readsNothing: no template of the set calls a graph function (a
	// chart kind whose hooks make it a graph): an include of a computed
	// name cannot reach a read the graph does not know of.
	readsNothing bool
}

type graphNode struct {
	Node
	name, file string
	// after: the declared and the inferred dependencies, sorted.
	after []string
	// reads are the node's inputs (input "name" in its template).
	reads []string
	// readyWhen are the names of the ReadyWhen templates in the kind's
	// set (see addRule).
	readyWhen []string
	// readsNodes are the nodes whose objects the template reads.
	readsNodes []string
	// secretInput says how the node holds a Secret input's data, directly
	// or through a node it reads that does: it may then render only
	// Secrets. (Reading the graph's own Secrets does not bind a node so:
	// their data is the graph's to hand to its objects; see
	// Kind.SecretNode for the rule that withholds what it says.)
	secretInput []string
}

type graphInput struct {
	Input
	// name and selector are the names of its templates in the kind's set
	// (see addRule); "" for the one it does not give.
	name, selector string
}

// Graph functions: a template reads the nodes before it and the inputs
// through them.
const (
	fnObject   = "object"
	fnObjects  = "objects"
	fnInput    = "input"
	fnNeed     = "need"
	fnGenerate = "generate"
)

// compileGraph checks a kind's graph and inputs at load time: nodes name
// templates, dependencies exist and have no cycle, readiness rules parse,
// the graph functions are called with literal names, generate only in
// createOnly nodes.
func compileGraph(decl Declaration, tmpl *template.Template, manifests []string) (*graph, error) {
	g := &graph{stage: map[string]int{}, nodes: map[string]*graphNode{}, inputs: map[string]*graphInput{}}
	g.readsNothing = len(decl.Inputs) == 0 && !callsGraph(tmpl, templateNames(tmpl))
	for _, file := range manifests {
		name := strings.TrimSuffix(file, ".yaml")
		g.nodes[name] = &graphNode{name: name, file: file, Node: decl.Graph[name]}
	}
	for name := range decl.Graph {
		if g.nodes[name] == nil {
			return nil, fmt.Errorf("graph: node %q has no template %s.yaml", name, name)
		}
	}
	for name, in := range decl.Inputs {
		gi, err := compileInput(name, in, tmpl)
		if err != nil {
			return nil, err
		}
		g.inputs[name] = gi
	}
	for _, name := range slices.Sorted(maps.Keys(g.nodes)) {
		if err := g.compileNode(g.nodes[name], tmpl); err != nil {
			return nil, fmt.Errorf("graph: %s: %w", g.nodes[name].file, err)
		}
	}
	if err := g.sort(); err != nil {
		return nil, fmt.Errorf("graph: %w", err)
	}
	g.taint()
	return g, nil
}

// readsSecretInput: an input of the graph is a Secret.
func (g *graph) readsSecretInput() bool {
	for _, in := range g.inputs {
		if in.secret() {
			return true
		}
	}
	return false
}

// taint spreads the rule that a Secret input's data flows only into
// Secrets: a node that reads the objects of a node that read a Secret
// input (directly or further up) is held to it too.
func (g *graph) taint() {
	for _, name := range g.order { // the nodes a node reads come before it
		n := g.nodes[name]
		for _, r := range n.readsNodes {
			if up := g.nodes[r]; len(up.secretInput) > 0 {
				n.secretInput = append(n.secretInput, fmt.Sprintf("node %q, which holds %s", r, up.secretInput[0]))
			}
		}
	}
}

func compileInput(name string, in Input, tmpl *template.Template) (*graphInput, error) {
	gi := &graphInput{Input: in}
	switch {
	case in.APIVersion == "" || in.Kind == "":
		return nil, fmt.Errorf("inputs: %s: apiVersion and kind are required", name)
	case (in.Name == "") == (in.Selector == ""):
		return nil, fmt.Errorf("inputs: %s: give exactly one of name and selector", name)
	}
	if in.Namespace != "" {
		if errs := validation.IsDNS1123Label(in.Namespace); len(errs) > 0 {
			return nil, fmt.Errorf("inputs: %s: namespace %q: %s", name, in.Namespace, strings.Join(errs, "; "))
		}
		if strings.Contains(in.Name+in.Selector, "{{") {
			// stencil reads it with its own rights: a spec that chose
			// the object would let a resource's author read, through
			// stencil, what they may not read in that namespace.
			return nil, fmt.Errorf("inputs: %s: an input in namespace %s, which the kind fixes, needs a fixed name or selector, not a template over the resource", name, in.Namespace)
		}
	}
	parse := func(what, src string) (string, error) {
		if src == "" {
			return "", nil
		}
		t := "inputs." + name + "." + what
		if err := addRule(tmpl, t, src); err != nil {
			return "", fmt.Errorf("inputs: %s: %s: %w", name, what, err)
		}
		return t, nil
	}
	var err error
	if gi.name, err = parse("name", in.Name); err != nil {
		return nil, err
	}
	if gi.selector, err = parse("selector", in.Selector); err != nil {
		return nil, err
	}
	return gi, nil
}

// compileNode infers what a node's template reads, checks it, and parses
// its readiness rules.
func (g *graph) compileNode(n *graphNode, tmpl *template.Template) error {
	after := map[string]bool{}
	for _, a := range n.After {
		if g.nodes[a] == nil {
			return fmt.Errorf("after: no node %q (nodes are the templates' file names without .yaml)", a)
		}
		after[a] = true
	}
	calls, err := graphCalls(tmpl, n.file)
	if err != nil {
		return err
	}
	reads := map[string]bool{}
	for _, c := range calls {
		switch c.fn {
		case fnObject, fnObjects:
			if g.nodes[c.arg] == nil {
				return fmt.Errorf("%s %q: no such node", c.fn, c.arg)
			}
			if c.arg == n.name {
				return fmt.Errorf("%s %q: a node cannot read its own objects (they are what it renders)", c.fn, c.arg)
			}
			after[c.arg] = true
			n.readsNodes = append(n.readsNodes, c.arg)
		case fnInput:
			in := g.inputs[c.arg]
			if in == nil {
				return fmt.Errorf("input %q: not declared under inputs in %s", c.arg, declarationFile)
			}
			reads[c.arg] = true
			if in.secret() {
				n.secretInput = append(n.secretInput, fmt.Sprintf("the Secret input %q", c.arg))
			}
		case "include":
			if g.readsNothing {
				continue
			}
			return fmt.Errorf("include takes a literal template name in a graph kind, as in {{ include \"name\" . }}: stencil reads the graph from what each template runs")
		case fnGenerate:
			if !n.CreateOnly {
				return fmt.Errorf("generate is allowed only in a createOnly node: a value generated at every render would change the object every time")
			}
		}
	}
	if after[n.name] {
		return fmt.Errorf("after: the node waits for itself")
	}
	n.after = slices.Sorted(maps.Keys(after))
	n.reads = slices.Sorted(maps.Keys(reads))
	slices.Sort(n.secretInput)
	n.secretInput = slices.Compact(n.secretInput)
	for i, src := range n.ReadyWhen {
		t := fmt.Sprintf("%s.readyWhen[%d]", n.name, i)
		if err := addRule(tmpl, t, src); err != nil {
			return fmt.Errorf("readyWhen[%d]: %w", i, err)
		}
		n.readyWhen = append(n.readyWhen, t)
	}
	return nil
}

// sort orders the nodes, dependencies first and by name among equals, and
// gives each its stage; a cycle is an error that names its nodes.
func (g *graph) sort() error {
	const (
		unseen = iota
		visiting
		done
	)
	state := map[string]int{}
	var path []string
	var visit func(string) error
	visit = func(name string) error {
		switch state[name] {
		case done:
			return nil
		case visiting:
			i := slices.Index(path, name)
			return fmt.Errorf("cycle: %s", strings.Join(append(slices.Clone(path[i:]), name), " → "))
		}
		state[name] = visiting
		path = append(path, name)
		stage := 0
		for _, a := range g.nodes[name].after {
			if err := visit(a); err != nil {
				return err
			}
			stage = max(stage, g.stage[a]+1)
		}
		path = path[:len(path)-1]
		state[name] = done
		g.stage[name] = stage
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(g.nodes)) {
		if err := visit(name); err != nil {
			return err
		}
	}
	g.order = slices.Sorted(maps.Keys(g.nodes))
	slices.SortStableFunc(g.order, func(a, b string) int { return g.stage[a] - g.stage[b] })
	return nil
}

// callsGraph: a template calls a graph function, so the kind is a graph
// kind even when its _kind.yaml declares no graph.
func callsGraph(tmpl *template.Template, manifests []string) bool {
	for _, file := range manifests {
		calls, err := graphCalls(tmpl, file)
		if err != nil || slices.ContainsFunc(calls, func(c graphCall) bool { return c.fn != "include" }) {
			return true // compileGraph reports the error
		}
	}
	return false
}

// templateNames are the names of every template of the set.
func templateNames(tmpl *template.Template) []string {
	var names []string
	for _, t := range tmpl.Templates() {
		names = append(names, t.Name())
	}
	return names
}

// graphCall is a call of a graph function with its literal first argument.
type graphCall struct{ fn, arg string }

// graphCalls finds the graph functions a template calls, following include
// and template into the named templates they run. Their first argument
// must be a literal string: the graph is known before anything renders.
func graphCalls(tmpl *template.Template, name string) ([]graphCall, error) {
	var calls []graphCall
	seen := map[string]bool{}
	var errs []error
	var walkTemplate func(string)
	walkTemplate = func(name string) {
		t := tmpl.Lookup(name)
		if seen[name] || t == nil || t.Tree == nil {
			return
		}
		seen[name] = true
		walkNodes(t.Root, func(c *parse.CommandNode) {
			id, ok := c.Args[0].(*parse.IdentifierNode)
			if !ok {
				return
			}
			switch id.Ident {
			case fnObject, fnObjects, fnInput:
				if len(c.Args) < 2 {
					errs = append(errs, fmt.Errorf("%s: call %s with a literal name, as in {{ %s \"name\" }}", name, id.Ident, id.Ident))
					return
				}
				s, ok := c.Args[1].(*parse.StringNode)
				if !ok {
					errs = append(errs, fmt.Errorf("%s: %s takes a literal name (as in {{ %s \"name\" }}), not %s", name, id.Ident, id.Ident, c.Args[1]))
					return
				}
				calls = append(calls, graphCall{fn: id.Ident, arg: s.Text})
			case fnGenerate:
				calls = append(calls, graphCall{fn: id.Ident})
			case "include", fnIncludeAt:
				at := 1
				if id.Ident == fnIncludeAt {
					at = 2 // after its site
				}
				if len(c.Args) <= at {
					return
				}
				s, ok := c.Args[at].(*parse.StringNode)
				if !ok {
					// What it runs must be known to know what it reads.
					calls = append(calls, graphCall{fn: "include"})
					return
				}
				walkTemplate(s.Text)
			}
		}, walkTemplate)
	}
	walkTemplate(name)
	if len(errs) > 0 {
		return nil, errs[0]
	}
	return calls, nil
}

// walkNodes calls f on every command under n, and template on the name of
// every {{ template }} it runs.
func walkNodes(n parse.Node, f func(*parse.CommandNode), tmpl func(string)) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			walkNodes(c, f, tmpl)
		}
	case *parse.ActionNode:
		walkNodes(n.Pipe, f, tmpl)
	case *parse.PipeNode:
		if n == nil {
			return
		}
		for _, c := range n.Cmds {
			walkNodes(c, f, tmpl)
		}
	case *parse.CommandNode:
		f(n)
		for _, a := range n.Args {
			walkNodes(a, f, tmpl)
		}
	case *parse.IfNode:
		walkBranch(&n.BranchNode, f, tmpl)
	case *parse.RangeNode:
		walkBranch(&n.BranchNode, f, tmpl)
	case *parse.WithNode:
		walkBranch(&n.BranchNode, f, tmpl)
	case *parse.ChainNode: // (object "a").data
		walkNodes(n.Node, f, tmpl)
	case *parse.TemplateNode:
		walkNodes(n.Pipe, f, tmpl)
		tmpl(n.Name)
	}
}

func walkBranch(b *parse.BranchNode, f func(*parse.CommandNode), tmpl func(string)) {
	walkNodes(b.Pipe, f, tmpl)
	walkNodes(b.List, f, tmpl)
	walkNodes(b.ElseList, f, tmpl)
}
