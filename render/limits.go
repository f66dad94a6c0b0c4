package render

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"text/template"
	"text/template/parse"
	"time"

	"github.com/Masterminds/sprig/v3"
)

// Limits bound what one custom resource can make a render cost. A spec is
// an untrusted input to the templates: a huge count fed to a range, to
// until or to repeat must not stall the operator's other resources. A
// render over a limit fails with a *LimitError, and nothing is applied or
// pruned.
type Limits struct {
	// Time is how long the templates of one render may execute.
	Time time.Duration
	// Bytes is how much the templates of one render may write, together.
	// Functions that allocate by a count (until, untilStep, seq, repeat,
	// indent, nindent) are charged what they would allocate, before they do.
	Bytes int
	// Objects is how many objects one render may produce.
	Objects int
	// StatusBytes is how much the status template may write.
	StatusBytes int
}

// DefaultLimits are generous for any kind we know of (a seed kind's render
// writes about 2 KiB, in well under a millisecond) and small enough that a
// hostile spec costs the operator a second of one worker at most.
var DefaultLimits = Limits{Time: time.Second, Bytes: 4 << 20, Objects: 1000, StatusBytes: 64 << 10}

// Check refuses limits that would stop every render: each must be positive.
func (l Limits) Check() error {
	if l.Time <= 0 || l.Bytes <= 0 || l.Objects <= 0 || l.StatusBytes <= 0 {
		return fmt.Errorf("render limits must be positive: --render-timeout=%s --render-max-bytes=%d --render-max-objects=%d --status-max-bytes=%d", l.Time, l.Bytes, l.Objects, l.StatusBytes)
	}
	return nil
}

// LimitError is a render stopped by one of its Limits.
type LimitError struct {
	// Limit names the limit: "render time", "rendered bytes", "rendered
	// objects" or "status bytes".
	Limit string
	// Max is the limit's value, as its flag takes it.
	Max string
}

func (e *LimitError) Error() string {
	return "the render exceeded its limit on " + e.Limit + " (" + e.Max + ")"
}

// budget is what is left of one execution's limits.
type budget struct {
	depth     int // of include
	deadline  time.Time
	left      int
	bytesName string // the limit on bytes this execution runs under
	bytesMax  int
	timeMax   time.Duration
	// scope is what the graph functions read while a graph kind's node
	// renders (nil otherwise).
	scope *graphScope
}

// reset starts an execution of at most bytes (the limit named name) within
// l.Time from now.
func (b *budget) reset(l Limits, bytes int, name string) {
	*b = budget{deadline: time.Now().Add(l.Time), left: bytes, bytesName: name, bytesMax: bytes, timeMax: l.Time}
}

func (b *budget) overBytes() error {
	b.left = -1
	return &LimitError{Limit: b.bytesName, Max: strconv.Itoa(b.bytesMax)}
}

// spend charges n bytes, and fails when the budget or the time is spent.
func (b *budget) spend(n int) error {
	if n < 0 || n > b.left {
		return b.overBytes()
	}
	b.left -= n
	return b.check()
}

// spendCount charges count items of each bytes, checking before it
// multiplies (a hostile count must not overflow into a small charge).
func (b *budget) spendCount(count float64, each int) error {
	count = math.Abs(count)
	if count*float64(each) > float64(b.left) {
		return b.overBytes()
	}
	return b.spend(int(count) * each)
}

// check fails when the time is spent.
func (b *budget) check() error {
	if time.Now().After(b.deadline) {
		return &LimitError{Limit: "render time", Max: b.timeMax.String()}
	}
	return nil
}

// meteredWriter is a buffer that charges every write to a budget.
type meteredWriter struct {
	bytes.Buffer
	b *budget
}

func (w *meteredWriter) Write(p []byte) (int, error) {
	if err := w.b.spend(len(p)); err != nil {
		return 0, err
	}
	return w.Buffer.Write(p)
}

// peekWriter is include's buffer: its output is charged when the caller
// writes it, so here it only may not outgrow what is left, nor the time.
type peekWriter struct {
	bytes.Buffer
	b *budget
}

func (w *peekWriter) Write(p []byte) (int, error) {
	if w.Len()+len(p) > w.b.left {
		return 0, &LimitError{Limit: w.b.bytesName, Max: strconv.Itoa(w.b.bytesMax)}
	}
	if err := w.b.check(); err != nil {
		return 0, err
	}
	return w.Buffer.Write(p)
}

// metered returns a copy of t whose include and count-driven functions
// charge b, for one execution.
func metered(t *template.Template, b *budget) (*template.Template, error) {
	c, err := t.Clone()
	if err != nil {
		return nil, fmt.Errorf("preparing the templates: %w", err)
	}
	const intBytes = 8
	c.Funcs(template.FuncMap{
		tick: func() (string, error) { return "", b.check() },
		"include": func(name string, data any) (string, error) {
			if b.depth >= maxIncludeDepth {
				return "", &LimitError{Limit: "include depth", Max: strconv.Itoa(maxIncludeDepth)}
			}
			b.depth++
			defer func() { b.depth-- }()
			w := &peekWriter{b: b}
			if err := c.ExecuteTemplate(w, name, data); err != nil {
				if limit, ok := errors.AsType[*LimitError](err); ok {
					return "", limit // not wrapped again at every level
				}
				return "", err
			}
			return w.String(), b.spend(w.Len())
		},
		"replace": func(old, repl, src string) (string, error) {
			n := strings.Count(src, old)
			if err := b.spendCount(float64(n), max(len(repl)-len(old), 0)); err != nil {
				return "", err
			}
			return strings.ReplaceAll(src, old, repl), nil
		},
		"regexReplaceAll": func(regex, src, repl string) (string, error) {
			return b.regexReplace(regex, src, repl, false)
		},
		"regexReplaceAllLiteral": func(regex, src, repl string) (string, error) {
			return b.regexReplace(regex, src, repl, true)
		},
		"join": func(sep string, v any) (string, error) {
			if err := b.spendCount(float64(listLen(v)), len(sep)); err != nil {
				return "", err
			}
			return sprigCounted().join(sep, v), nil
		},
		"wrapWith": func(l int, sep, str string) (string, error) {
			if l > 0 {
				if err := b.spendCount(float64(len(str)/l+1), len(sep)); err != nil {
					return "", err
				}
			}
			return sprigCounted().wrapWith(l, sep, str), nil
		},
		"printf": func(format string, args ...any) (string, error) {
			if strings.Contains(format, "*") { // a width or precision from an argument
				for _, a := range args {
					if n, ok := a.(int); ok && n > b.left {
						return "", b.overBytes()
					}
				}
			}
			out := fmt.Sprintf(format, args...)
			return out, b.spend(len(out))
		},
		"until": func(n int) ([]int, error) {
			if err := b.spendCount(float64(n), intBytes); err != nil {
				return nil, err
			}
			return sprigCounted().until(n), nil
		},
		"untilStep": func(start, stop, step int) ([]int, error) {
			if n := (float64(stop) - float64(start)) / float64(step); step != 0 && n > 0 { // else the list is empty
				if err := b.spendCount(n, intBytes); err != nil {
					return nil, err
				}
			}
			return sprigCounted().untilStep(start, stop, step), nil
		},
		"seq": func(params ...int) (string, error) {
			if err := b.spendCount(seqLen(params), intBytes); err != nil {
				return "", err
			}
			return sprigCounted().seq(params...), nil
		},
		"repeat": func(count int, s string) (string, error) {
			if count > 0 {
				if err := b.spendCount(float64(count), len(s)); err != nil {
					return "", err
				}
			}
			return sprigCounted().repeat(count, s), nil
		},
		"indent": func(spaces int, s string) (string, error) {
			if err := b.spendCount(float64(spaces), 1+strings.Count(s, "\n")); err != nil {
				return "", err
			}
			return sprigCounted().indent(spaces, s), nil
		},
		"nindent": func(spaces int, s string) (string, error) {
			if err := b.spendCount(float64(spaces), 1+strings.Count(s, "\n")); err != nil {
				return "", err
			}
			return sprigCounted().nindent(spaces, s), nil
		},
	})
	c.Funcs(graphFuncs(b))
	c.Funcs(chargedAfter(b, "print", "println", "cat", "quote", "squote", "toYaml", "toJson", "toPrettyJson", "toRawJson", "b64enc", "b32enc", "wrap", "nospace", "upper", "lower", "title", "trim"))
	return c, nil
}

// maxIncludeDepth bounds include's recursion (each include is a new
// execution, so text/template's own depth limit does not apply). Helm's is
// 1000; a helper that recurses further is driven by its input.
const maxIncludeDepth = 100

// regexReplace is sprig's regexReplaceAll (or its Literal form), checked
// before it allocates: the result is at most the input, plus the
// replacement per match, plus (when $ expands groups) the input per $ per
// match.
func (b *budget) regexReplace(regex, src, repl string, literal bool) (string, error) {
	r, err := regexp.Compile(regex)
	if err != nil {
		return "", err
	}
	matches := float64(len(r.FindAllStringIndex(src, -1)))
	estimate := matches * float64(len(repl))
	if !literal {
		estimate += matches * float64(strings.Count(repl, "$")) * float64(len(src))
	}
	if estimate > float64(b.left) {
		return "", b.overBytes()
	}
	var out string
	if literal {
		out = r.ReplaceAllLiteralString(src, repl)
	} else {
		out = r.ReplaceAllString(src, repl)
	}
	return out, b.spend(len(out))
}

// listLen is the length of a list join would join, 0 for anything else.
func listLen(v any) int {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array {
		return rv.Len()
	}
	return 0
}

// chargedAfter wraps the named functions of sprig's library (and
// text/template's print and println) so that the strings they return are
// charged to b: their output grows with their input, so a loop that feeds
// one's output back in (doubling a string) runs out of budget instead of
// memory.
func chargedAfter(b *budget, names ...string) template.FuncMap {
	lib := sprigCounted().all
	fm := template.FuncMap{}
	errType := reflect.TypeFor[error]()
	for _, name := range names {
		var fn reflect.Value
		switch name {
		case "print":
			fn = reflect.ValueOf(fmt.Sprint)
		case "println":
			fn = reflect.ValueOf(fmt.Sprintln)
		default:
			if lib[name] == nil {
				continue
			}
			fn = reflect.ValueOf(lib[name])
		}
		t := fn.Type()
		ins := make([]reflect.Type, t.NumIn())
		for i := range ins {
			ins[i] = t.In(i)
		}
		wrapped := reflect.FuncOf(ins, []reflect.Type{t.Out(0), errType}, t.IsVariadic())
		fm[name] = reflect.MakeFunc(wrapped, func(args []reflect.Value) []reflect.Value {
			var out []reflect.Value
			if t.IsVariadic() {
				out = fn.CallSlice(args)
			} else {
				out = fn.Call(args)
			}
			var err error
			if len(out) > 1 && !out[1].IsNil() {
				err = out[1].Interface().(error)
			}
			if s, ok := out[0].Interface().(string); ok && err == nil {
				err = b.spend(len(s))
			}
			errValue := reflect.Zero(errType)
			if err != nil {
				errValue = reflect.ValueOf(&err).Elem()
			}
			return []reflect.Value{out[0], errValue}
		}).Interface()
	}
	return fm
}

// seqLen is about how many numbers sprig's seq(params...) would print.
func seqLen(params []int) float64 {
	start, stop, step := 1.0, 0.0, 1.0
	switch len(params) {
	case 1:
		stop = float64(params[0])
	case 2:
		start, stop = float64(params[0]), float64(params[1])
	case 3:
		start, step, stop = float64(params[0]), float64(params[1]), float64(params[2])
	default:
		return 0
	}
	if step == 0 {
		return 0
	}
	return (stop-start)/step + 1
}

// counted are sprig's functions that allocate by a count, which metered
// wraps.
type counted struct {
	until     func(int) []int
	untilStep func(int, int, int) []int
	seq       func(...int) string
	repeat    func(int, string) string
	indent    func(int, string) string
	nindent   func(int, string) string
	join      func(string, any) string
	wrapWith  func(int, string, string) string
	all       template.FuncMap // the library, for chargedAfter
}

var sprigCounted = sync.OnceValue(func() counted {
	fm := sprig.TxtFuncMap()
	return counted{
		until:     fm["until"].(func(int) []int),
		untilStep: fm["untilStep"].(func(int, int, int) []int),
		seq:       fm["seq"].(func(...int) string),
		repeat:    fm["repeat"].(func(int, string) string),
		indent:    fm["indent"].(func(int, string) string),
		nindent:   fm["nindent"].(func(int, string) string),
		join:      fm["join"].(func(string, any) string),
		wrapWith:  fm["wrapWith"].(func(int, string, string) string),
		all:       template.FuncMap(funcs(template.New(""))),
	}
})

// tick is the function addTicks calls at the start of every template and of
// every range iteration, so that the render time is checked even in a loop
// that writes nothing and calls nothing (a range over a huge integer).
const tick = "stencilTick"

// addTicks puts a call of tick first in every template of t and in the body
// of every range, at load time.
func addTicks(t *template.Template) error {
	probe, err := template.New("tick").Funcs(template.FuncMap{tick: func() string { return "" }}).Parse("{{" + tick + "}}")
	if err != nil {
		return fmt.Errorf("preparing the render time check: %w", err)
	}
	call := probe.Tree.Root.Nodes[0]
	for _, tmpl := range t.Templates() {
		if tmpl.Tree == nil || tmpl.Tree.Root == nil {
			continue
		}
		prepend(tmpl.Tree.Root, call)
		walkRanges(tmpl.Tree.Root, func(r *parse.RangeNode) { prepend(r.List, call) })
	}
	return nil
}

func prepend(list *parse.ListNode, n parse.Node) {
	if list != nil {
		list.Nodes = append([]parse.Node{n.Copy()}, list.Nodes...)
	}
}

// walkRanges calls f on every range node under n.
func walkRanges(n parse.Node, f func(*parse.RangeNode)) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			walkRanges(c, f)
		}
	case *parse.RangeNode:
		walkRanges(n.List, f)
		walkRanges(n.ElseList, f)
		f(n)
	case *parse.IfNode:
		walkRanges(n.List, f)
		walkRanges(n.ElseList, f)
	case *parse.WithNode:
		walkRanges(n.List, f)
		walkRanges(n.ElseList, f)
	}
}
