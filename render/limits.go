package render

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"regexp"
	"slices"
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
	// Steps is how much work the templates of one render may do: each
	// template or include executed, range iteration, write and metered
	// function call is a step. It measures the templates' work, whatever
	// the machine's load: a render over it fails the same on a busy node
	// and an idle one.
	Steps int
	// Time is how long the templates of one render may execute, wall
	// time: a backstop for work that steps do not count, far above what
	// Steps allows on any machine.
	Time time.Duration
	// Bytes is how much the templates of one render may write, together.
	// Functions that allocate by a count (until, untilStep, seq, repeat,
	// indent, nindent) are charged what they would allocate, before they do;
	// functions that build a list or a dict (list, dict, append, concat,
	// merge…) 8 bytes an element or entry of what they make.
	Bytes int
	// Objects is how many objects one render may produce.
	Objects int
	// StatusBytes is how much the status template may write.
	StatusBytes int
}

// DefaultLimits are generous for any kind we know of (a seed kind's render
// writes about 2 KiB, in well under a millisecond, in a few hundred steps;
// the largest public chart we import, prometheus, takes about 3,100 steps
// and 70 ms). A million steps of a loop take 0.25 to 0.7 s on a loaded
// 2-core machine; a step costs the same whatever its input, so a loop of
// functions over a large value (contains on a megabyte) is stopped by
// Time, wall time, at 2 s: twice the old limit, which a busy machine hit
// with valid templates.
var DefaultLimits = Limits{Steps: DefaultSteps, Time: 2 * time.Second, Bytes: 4 << 20, Objects: 1000, StatusBytes: 64 << 10}

// DefaultSteps is the default limit on a render's steps.
const DefaultSteps = 1_000_000

// Check refuses limits that would stop every render: each must be positive.
func (l Limits) Check() error {
	if l.Steps <= 0 || l.Time <= 0 || l.Bytes <= 0 || l.Objects <= 0 || l.StatusBytes <= 0 {
		return fmt.Errorf("render limits must be positive: --render-max-steps=%d --render-timeout=%s --render-max-bytes=%d --render-max-objects=%d --status-max-bytes=%d", l.Steps, l.Time, l.Bytes, l.Objects, l.StatusBytes)
	}
	return nil
}

// LimitError is a render stopped by one of its Limits.
type LimitError struct {
	// Limit names the limit: "render steps", "render time", "rendered
	// bytes", "rendered objects" or "status bytes".
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
	steps     int // left
	stepsMax  int
	deadline  time.Time
	left      int
	bytesName string // the limit on bytes this execution runs under
	bytesMax  int
	timeMax   time.Duration
	// scope is what the graph functions read while a graph kind's node
	// renders (nil otherwise).
	scope *graphScope
	// capabilities are what the capabilities function returns (nil
	// outside a kind's templates).
	capabilities *Capabilities
	// tplPolicy is what tpl may run: the kind's own strings, or any.
	tplPolicy
	// out is the output the execution writes to now: the template's, or
	// an include's or tpl's (outNested), which its caller prints.
	out       *bytes.Buffer
	outNested bool
	// data is the execution's data (dot), for naming a value in errors.
	data any
	// gen are a chart kind's generated values where its manifests render
	// (nil elsewhere).
	gen *generation
	// lookups is what a chart kind's lookup reads (nil: not a chart kind).
	lookups *lookups
	// inTpl counts the tpl executions under way: their templates are
	// made of values, and may not generate.
	inTpl int
}

// writeTo makes w the output the execution writes to now, until the
// returned function restores the one before.
func (b *budget) writeTo(w *bytes.Buffer, nested bool) func() {
	out, outNested := b.out, b.outNested
	b.out, b.outNested = w, nested
	return func() { b.out, b.outNested = out, outNested }
}

// reset starts an execution of at most bytes (the limit named name) within
// l.Time from now.
func (b *budget) reset(l Limits, bytes int, name string) {
	*b = budget{steps: l.Steps, stepsMax: l.Steps, deadline: time.Now().Add(l.Time), left: bytes, bytesName: name, bytesMax: bytes, timeMax: l.Time}
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

// check counts a step, and fails when the steps are spent, or the time
// (read every 64 steps: a step is cheaper than reading the clock).
func (b *budget) check() error {
	b.steps--
	if b.steps < 0 {
		b.steps = -1 // every later check fails too
		return &LimitError{Limit: "render steps", Max: strconv.Itoa(b.stepsMax)}
	}
	if b.steps&63 == 0 && time.Now().After(b.deadline) {
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
	c.Funcs(meteredFuncs(c, b))
	return c, nil
}

// meteredFuncs are the functions metered puts in place of the library's,
// in the execution c: what they allocate or write is charged to b.
func meteredFuncs(c *template.Template, b *budget) template.FuncMap {
	fm := executionFuncs(c, b)
	maps.Copy(fm, meteredStringFuncs(b))
	maps.Copy(fm, meteredSequenceFuncs(b))
	maps.Copy(fm, meteredDictFuncs(b))
	maps.Copy(fm, guardedFuncs(b))
	maps.Copy(fm, printedFuncs(b))
	maps.Copy(fm, graphFuncs(b))
	maps.Copy(fm, generatedFuncs(b))
	fm["lookup"] = b.lookup
	fm[fnCapabilities] = capabilitiesFunc(b)
	maps.Copy(fm, chargedAfter(b, nil, shallowSize, stringFuncs...))
	maps.Copy(fm, chargedAfter(b, b.fitsArgs, shallowSize, printingFuncs...))
	maps.Copy(fm, chargedAfter(b, nil, shallowSize, listFuncs...))
	maps.Copy(fm, chargedAfter(b, b.fitsArgs, stringsSize, printingListFuncs...))
	maps.Copy(fm, chargedAfter(b, nil, func(v any) int { return deepSize(v, b.left) }, deepFuncs...))
	return fm
}

// executionFuncs are the functions that execute templates of c, include
// and tpl, charging b what they write and limiting include's depth, and
// the render time check (tick).
func executionFuncs(c *template.Template, b *budget) template.FuncMap {
	return template.FuncMap{
		tick:      func() (string, error) { return "", b.check() },
		"include": func(name string, data any) (string, error) { return b.include(c, name, data) },
		fnIncludeAt: func(site, name string, data any) (string, error) {
			defer b.gen.enter(site, name)()
			return b.include(c, name, data)
		},
		"tpl": func(src string, data any) (string, error) {
			return b.tpl(c, src, data)
		},
	}
}

// include is Helm's include: the template name of c executed with data,
// charged to b.
func (b *budget) include(c *template.Template, name string, data any) (string, error) {
	if b.depth >= maxIncludeDepth {
		return "", &LimitError{Limit: "include depth", Max: strconv.Itoa(maxIncludeDepth)}
	}
	b.depth++
	defer func() { b.depth-- }()
	w := &peekWriter{b: b}
	defer b.writeTo(&w.Buffer, true)()
	if err := c.ExecuteTemplate(w, name, data); err != nil {
		if limit, ok := errors.AsType[*LimitError](err); ok {
			return "", limit // not wrapped again at every level
		}
		return "", err
	}
	return w.String(), b.spend(w.Len())
}

// meteredStringFuncs are the functions whose strings grow with a count
// (of matches, of lines, a width or a repeat): they charge b what the
// count makes them write.
func meteredStringFuncs(b *budget) template.FuncMap {
	return template.FuncMap{
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
		"mustRegexReplaceAll": func(regex, src, repl string) (string, error) {
			return b.regexReplace(regex, src, repl, false)
		},
		"mustRegexReplaceAllLiteral": func(regex, src, repl string) (string, error) {
			return b.regexReplace(regex, src, repl, true)
		},
		"join": func(sep string, v any) (string, error) {
			if err := b.fits(listLen(v)*len(sep), v); err != nil {
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
			// Widths and precisions, literal or from an argument, are
			// measured with the arguments, before fmt allocates them.
			if err := b.fits(len(format)+formatWidths(format, args), args...); err != nil {
				return "", err
			}
			out := fmt.Sprintf(format, args...)
			return out, b.spend(len(out))
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
	}
}

// meteredSequenceFuncs are the functions that make a sequence of numbers
// (until, untilStep, seq): they charge b for each number before they
// make it.
func meteredSequenceFuncs(b *budget) template.FuncMap {
	const intBytes = 8
	return template.FuncMap{
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
	}
}

// meteredDictFuncs are the functions that copy a dict (deepCopy): they
// charge b what they copy. (set and the merges, which add to a dict in
// place, are guardedFuncs.)
func meteredDictFuncs(b *budget) template.FuncMap {
	return template.FuncMap{
		"deepCopy":     b.copyCharged(sprigCounted().deepCopy),
		"mustDeepCopy": b.copyCharged(sprigCounted().mustDeepCopy),
	}
}

// stringFuncs return strings that grow with their input: they are charged
// their length, after they return. (The functions that print a value of
// any shape are printingFuncs, measured before too.)
var stringFuncs = []string{"b64enc", "b32enc", "wrap", "nospace", "upper", "lower", "title", "trim"}

// listFuncs build a list or a dict, a copy however it is made: they are
// charged elemBytes an element or entry of what they return, after they
// return. A loop that appends to a list, or doubles one with concat, runs
// out of budget, not memory. (set and merge, which add to a dict in
// place, are charged what they add; until and untilStep what they will
// allocate, before they do.)
var listFuncs = []string{
	"list", "tuple", "dict", "append", "push", "prepend", "concat", "rest", "initial", "reverse", "compact",
	"mustAppend", "mustPush", "mustPrepend", "mustRest", "mustInitial", "mustReverse", "mustCompact",
	"keys", "values", "pluck", "pick", "omit",
	"splitList", "split", "splitn", "regexFindAll", "mustRegexFindAll", "regexSplit", "mustRegexSplit",
}

// deepFuncs make a structure of new lists and dicts at every level (chunk
// lists of lists, fromJson whatever its input holds): they are charged
// elemBytes an element or entry at every level, after they return.
var deepFuncs = []string{"chunk", "mustChunk", "fromJson", "mustFromJson", "fromYaml", "fromYamlArray", "fromJsonArray"}

// elemBytes is what an element of a list, or an entry of a dict, that a
// function makes is charged: a word, as until is charged for each of its
// ints. The elements themselves are shared with the function's input, not
// copied.
const elemBytes = 8

// shallowSize is what a function's result is charged: a string its length,
// a list or a dict elemBytes an element or entry.
func shallowSize(v any) int {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.String:
		return rv.Len()
	case reflect.Slice, reflect.Array, reflect.Map:
		return elemBytes * rv.Len()
	}
	return 0
}

// deepSize is elemBytes for every element and entry of v at every level,
// as a copy of v would hold them (parts that v shares, or v itself when it
// holds itself, count every time they are reached). It counts to just past
// limit, no further: a structure that shares its parts costs no more to
// measure than the budget it is measured against.
func deepSize(v any, limit int) int {
	n := 0
	stack := []reflect.Value{reflect.ValueOf(v)}
	for len(stack) > 0 && n <= limit {
		rv := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for (rv.Kind() == reflect.Interface || rv.Kind() == reflect.Pointer) && !rv.IsNil() {
			rv = rv.Elem()
		}
		switch rv.Kind() {
		case reflect.Slice, reflect.Array:
			n += elemBytes * rv.Len()
			for i := 0; i < rv.Len() && n <= limit; i++ {
				stack = append(stack, rv.Index(i))
			}
		case reflect.Map:
			n += elemBytes * rv.Len()
			for it := rv.MapRange(); it.Next() && n <= limit; {
				stack = append(stack, it.Value())
			}
		}
	}
	return n
}

// copyCharged is deepCopy (or mustDeepCopy) charged the copy it would
// make, before it makes it.
func (b *budget) copyCharged(deepCopy func(any) (any, error)) func(any) (any, error) {
	return func(v any) (any, error) {
		if err := b.spend(deepSize(v, b.left)); err != nil {
			return nil, err
		}
		return deepCopy(v)
	}
}

// mergeCharged is merge (or mergeOverwrite, or their must forms), which
// adds the entries of srcs to dst in place, charged those entries.
func (b *budget) mergeCharged(merge func(map[string]any, ...map[string]any) (any, error)) func(map[string]any, ...map[string]any) (any, error) {
	return func(dst map[string]any, srcs ...map[string]any) (any, error) {
		n := 0
		for _, src := range srcs {
			n += len(src)
		}
		if err := b.spend(elemBytes * n); err != nil {
			return nil, err
		}
		return merge(dst, srcs...)
	}
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
// text/template's print, println, html, js and urlquery) so that what they
// return is charged to b, cost(result) bytes: their output grows with
// their input, so a loop that feeds one's output back in (doubling a
// string, or a list) runs out of budget instead of memory. before, when
// not nil, checks the arguments first.
func chargedAfter(b *budget, before func([]reflect.Value) error, cost func(any) int, names ...string) template.FuncMap {
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
		case "html":
			fn = reflect.ValueOf(template.HTMLEscaper)
		case "js":
			fn = reflect.ValueOf(template.JSEscaper)
		case "urlquery":
			fn = reflect.ValueOf(template.URLQueryEscaper)
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
			if before != nil {
				if err := before(args); err != nil {
					return []reflect.Value{reflect.Zero(t.Out(0)), reflect.ValueOf(&err).Elem()}
				}
			}
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
			if err == nil {
				err = b.spend(cost(out[0].Interface()))
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
	set       func(map[string]any, string, any) map[string]any
	// deepCopy, merge and mergeOverwrite, with the signature of their
	// must forms.
	deepCopy, mustDeepCopy                               func(any) (any, error)
	merge, mergeOverwrite, mustMerge, mustMergeOverwrite func(map[string]any, ...map[string]any) (any, error)
	all                                                  template.FuncMap // the library, for chargedAfter
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
		set:       fm["set"].(func(map[string]any, string, any) map[string]any),
		deepCopy: func(v any) (any, error) {
			return fm["deepCopy"].(func(any) any)(v), nil
		},
		mustDeepCopy:       fm["mustDeepCopy"].(func(any) (any, error)),
		merge:              mustForm(fm["merge"].(func(map[string]any, ...map[string]any) any)),
		mergeOverwrite:     mustForm(fm["mergeOverwrite"].(func(map[string]any, ...map[string]any) any)),
		mustMerge:          fm["mustMerge"].(func(map[string]any, ...map[string]any) (any, error)),
		mustMergeOverwrite: fm["mustMergeOverwrite"].(func(map[string]any, ...map[string]any) (any, error)),
		all:                template.FuncMap(funcs(template.New(""))),
	}
})

// mustForm is merge or mergeOverwrite with the signature of its must form.
func mustForm(merge func(map[string]any, ...map[string]any) any) func(map[string]any, ...map[string]any) (any, error) {
	return func(dst map[string]any, srcs ...map[string]any) (any, error) { return merge(dst, srcs...), nil }
}

// tick is the function addTicks calls at the start of every template and of
// every range iteration, so that the render time is checked even in a loop
// that writes nothing and calls nothing (a range over a huge integer).
const tick = "stencilTick"

// instrument prepares templates ts for a render's execution, at load
// time: the print checks (see [addPrintChecks]) and the time checks (see
// [addTicks]).
func instrument(sources map[string]string, ts ...*template.Template) error {
	if err := addPrintChecks(sources, ts...); err != nil {
		return err
	}
	return addTicks(ts...)
}

// addTicks puts a call of tick first in every template of ts and in the
// body of every range.
func addTicks(ts ...*template.Template) error {
	probe, err := template.New("tick").Funcs(template.FuncMap{tick: func() string { return "" }}).Parse("{{" + tick + "}}")
	if err != nil {
		return fmt.Errorf("preparing the render time check: %w", err)
	}
	call := probe.Root.Nodes[0]
	for _, tmpl := range ts {
		if tmpl.Tree == nil || tmpl.Root == nil {
			continue
		}
		prepend(tmpl.Root, call)
		walkRanges(tmpl.Root, func(r *parse.RangeNode) { prepend(r.List, call) })
	}
	return nil
}

// addRule parses src, a template that _kind.yaml holds (a readyWhen rule,
// an input's name or selector), into the kind's set t as name, with
// instrument's print and time checks: it runs in a render's execution, within the
// render's limits, as the templates of the kind's files do. It may not
// define templates, which would replace the set's own.
func addRule(t *template.Template, name, src string) error {
	if t.Lookup(name) != nil {
		return fmt.Errorf("a template is already named %q", name)
	}
	probe, err := t.Clone()
	if err == nil {
		_, err = probe.New(name).Parse(src)
	}
	if err != nil {
		return err
	}
	for _, p := range probe.Templates() {
		if own := t.Lookup(p.Name()); p.Name() != name && (own == nil || own.Tree != p.Tree) {
			return fmt.Errorf("it defines the template %q: define templates in a .tpl file", p.Name())
		}
	}
	added, err := t.AddParseTree(name, probe.Lookup(name).Tree)
	if err != nil {
		return err
	}
	return instrument(map[string]string{name: src}, added)
}

// rule runs the template name that addRule parsed over data, within what
// is left of the execution's limits, and returns its output trimmed. The
// graph functions fail in it, as they do outside a node's template.
func (e *execution) rule(name string, data any) (string, error) {
	scope := e.b.scope
	e.b.scope = nil
	defer func() { e.b.scope = scope }()
	out, err := e.execute(name, data)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
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

// tpl is Helm's tpl: src, a string of the values, executed as a template
// of the set c (its named templates are there to include) with data as
// dot, charged to b like an include. A string of the values is data: tpl
// runs it only when it is the kind's own (b.own: its chart's values and
// files), when every action in it is one of those strings' (a chart value
// passed through toYaml, the resource's text among it), or when the kind
// lets its resources' values be templates (tpl: any);
// otherwise a src with template actions fails the render, and one without
// is returned as it is, as Helm does. What a src that is not the kind's own
// writes may not start a YAML document (see [startsDocument]).
func (b *budget) tpl(c *template.Template, src string, data any) (string, error) {
	if b.depth >= maxIncludeDepth {
		return "", &LimitError{Limit: "include depth", Max: strconv.Itoa(maxIncludeDepth)}
	}
	own := b.own[src]
	if !strings.Contains(src, "{{") {
		return src, b.checkTplOutput(src, own)
	}
	if !own && !b.tplValues && !b.ownTemplate(src) {
		return "", fmt.Errorf("tpl: a value of the resource holds template actions (%.60q): values are data, and this kind runs only its chart's own values as templates (set tpl: any in _kind.yaml to run its resources' values too; docs/tenancy.md)", src)
	}
	t, err := c.Clone()
	if err != nil {
		return "", fmt.Errorf("tpl: %w", err)
	}
	// include and tpl in src see the templates src defines, as Helm's do.
	t.Funcs(executionFuncs(t, b))
	if t, err = t.New("tpl").Parse(src); err != nil {
		return "", fmt.Errorf("tpl: %w", err)
	}
	// What a graph node reads is known before it renders; a template
	// made of values may not read more.
	if calls, err := graphCalls(t, "tpl"); err != nil || slices.ContainsFunc(calls, func(c graphCall) bool { return c.fn != "include" || b.scope != nil }) {
		return "", errors.New("tpl: a template made of values may not call object, objects, input or generate, nor, in a graph, include a computed name")
	}
	// Every template the source defines runs under the time and print
	// checks too.
	for _, d := range t.Templates() {
		if orig := c.Lookup(d.Name()); orig == nil || orig.Tree != d.Tree {
			if err := instrument(map[string]string{"tpl": src}, d); err != nil {
				return "", err
			}
		}
	}
	b.depth++
	b.inTpl++
	defer func() { b.depth--; b.inTpl-- }()
	w := &peekWriter{b: b}
	defer b.writeTo(&w.Buffer, true)()
	if err := t.Execute(w, data); err != nil {
		if limit, ok := errors.AsType[*LimitError](err); ok {
			return "", limit
		}
		return "", fmt.Errorf("tpl: %w", err)
	}
	if err := b.checkTplOutput(w.String(), own); err != nil {
		return "", err
	}
	return w.String(), b.spend(w.Len())
}

// checkTplOutput refuses what tpl made of a src that is not the kind's own
// (own false) when it starts a YAML document.
func (b *budget) checkTplOutput(out string, own bool) error {
	if own || !startsDocument(out, true) {
		return nil
	}
	return errors.New("tpl: a value of the resource holds a YAML document marker (--- or ...) at the start of a line: values are data and cannot add a document")
}
