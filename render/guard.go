package render

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/template"
	"text/template/parse"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
)

// A spec is data that a stranger writes, and the templates print it, copy
// it and, through tpl, may run it. The guards here keep one render within
// its budget before anything is allocated, whatever the values hold:
//
//   - every function that prints a value (print, printf, toYaml, toJson,
//     quote…) and every value a template prints is measured first: the
//     size it would print (a list shared with itself counts every time it
//     is printed) is charged against what is left of the budget, and a
//     value nested deeper than maxNesting is refused (the only way a
//     structure could hold itself, were one built, is endless nesting);
//   - set and the merges refuse to make a dict hold itself;
//   - the functions whose work grows with the square of a list (uniq,
//     without) are charged that work;
//   - a printed value may not start a YAML document, so a value cannot add
//     an object to the output (see [startsDocument]).
//
// TestEveryFunctionIsBounded holds the template library to this: each of
// its functions is either guarded here or in limits.go, or listed in
// linearFuncs as costing no more than its arguments, which are charged.

// maxNesting is how deep a value a template may print or copy: deeper than
// any object the API server stores (its JSON decoder stops at 10,000, and
// no schema we know of nests past 30), shallow enough that walking it
// cannot exhaust a goroutine's stack.
const maxNesting = 1000

// nestingError is a value too deep to print or copy.
func nestingError() error {
	return &LimitError{Limit: "value nesting", Max: strconv.Itoa(maxNesting) + " levels; a value nested deeper, or one that holds itself"}
}

// printedSize is about how many bytes printing v writes, as YAML, JSON or
// Go's fmt does (each element of a list or dict costs its indentation at
// its depth, its key and a few bytes of punctuation), counted to just past
// limit and no further. It fails for a value nested deeper than
// maxNesting. It walks without recursion, so no value can exhaust the
// stack.
func printedSize(v any, limit int) (int, error) {
	type frame struct {
		v     reflect.Value
		depth int
	}
	n := 0
	stack := []frame{{reflect.ValueOf(v), 0}}
	for len(stack) > 0 && n <= limit {
		f := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		rv := f.v
		for (rv.Kind() == reflect.Interface || rv.Kind() == reflect.Pointer) && !rv.IsNil() {
			rv = rv.Elem()
		}
		switch rv.Kind() {
		case reflect.String:
			n += rv.Len() + 2
			continue
		case reflect.Slice, reflect.Array, reflect.Map, reflect.Struct:
		default:
			n += 8
			continue
		}
		if f.depth >= maxNesting {
			return n, nestingError()
		}
		each := 2*f.depth + 4
		switch rv.Kind() {
		case reflect.Slice, reflect.Array:
			n += 2 + each*rv.Len()
			for i := rv.Len() - 1; i >= 0 && n <= limit; i-- {
				stack = append(stack, frame{rv.Index(i), f.depth + 1})
			}
		case reflect.Map:
			n += 2 + each*rv.Len()
			for it := rv.MapRange(); it.Next() && n <= limit; {
				if k := it.Key(); k.Kind() == reflect.String {
					n += k.Len()
				}
				stack = append(stack, frame{it.Value(), f.depth + 1})
			}
		case reflect.Struct:
			n += 2 + each*rv.NumField()
			for _, field := range rv.Fields() {
				stack = append(stack, frame{field, f.depth + 1})
			}
		}
	}
	return n, nil
}

// fits fails when printing vs, and extra bytes besides, would write more
// than is left of b's budget, or a value is nested too deep. It charges
// nothing: what is printed is charged when it is written or returned.
func (b *budget) fits(extra int, vs ...any) error {
	n := extra
	for _, v := range vs {
		size, err := printedSize(v, b.left-n)
		if err != nil {
			return err
		}
		if n += size; n > b.left {
			return b.overBytes()
		}
	}
	return b.check()
}

// formatWidths is the sum of the widths and precisions that format writes
// its arguments at, literal ("%99d") or taken from args ("%*d"): what
// printf may write beyond its arguments' own size.
func formatWidths(format string, args []any) int {
	n := 0
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		for i++; i < len(format) && strings.IndexByte("+-# 0123456789.*[]", format[i]) >= 0; i++ {
			switch c := format[i]; {
			case c >= '0' && c <= '9':
				j := i
				for j < len(format) && format[j] >= '0' && format[j] <= '9' {
					j++
				}
				w, err := strconv.Atoi(format[i:j])
				if err != nil { // past an int: more than any budget
					w = int(^uint(0) >> 2)
				}
				n = min(n+w, int(^uint(0)>>2))
				i = j - 1
			case c == '*':
				for _, a := range args {
					if w, ok := a.(int); ok {
						n = min(n+max(w, -w), int(^uint(0)>>2))
					}
				}
			}
		}
	}
	return n
}

// printingFuncs are the functions that print their arguments, whole, into
// a string: each is measured (see [budget.fits]) before it runs, and
// charged what it returns after. Their implementations are text/template's
// and sprig's.
var printingFuncs = []string{
	"print", "println", "printf", "html", "js", "urlquery",
	"cat", "quote", "squote", "toString", "join",
	"toYaml", "toJson", "mustToJson", "toPrettyJson", "mustToPrettyJson", "toRawJson", "mustToRawJson",
}

// printingListFuncs print each element of a list into a list of strings
// (toStrings, and sortAlpha, which sorts them): measured before, and
// charged the strings' bytes after.
var printingListFuncs = []string{"toStrings", "sortAlpha"}

// stringsSize is what a list of strings holds: its strings' bytes, and a
// word each.
func stringsSize(v any) int {
	list, ok := v.([]string)
	if !ok {
		return shallowSize(v)
	}
	n := elemBytes * len(list)
	for _, s := range list {
		n += len(s)
	}
	return n
}

// fitsArgs is fits for a function's arguments, as chargedAfter hands them.
func (b *budget) fitsArgs(args []reflect.Value) error {
	vs := make([]any, 0, len(args))
	for _, a := range args {
		if a.IsValid() && a.CanInterface() {
			vs = append(vs, a.Interface())
		}
	}
	return b.fits(0, vs...)
}

// guardedFuncs are the functions that build or compare structures, whose
// cost is not their result's: set and the merges, which must not make a
// dict hold itself, and uniq and without, whose work is the square of a
// list's length.
func guardedFuncs(b *budget) template.FuncMap {
	return template.FuncMap{
		"set": func(d map[string]any, key string, value any) (map[string]any, error) {
			if err := b.spend(elemBytes); err != nil { // in place: one entry more
				return nil, err
			}
			if reaches(value, map[uintptr]bool{reflect.ValueOf(d).Pointer(): true}) {
				return nil, fmt.Errorf("set: the value set under %q holds the dict it is set into; a value may not hold itself", key)
			}
			return sprigCounted().set(d, key, value), nil
		},
		"merge":              b.mergeGuarded(sprigCounted().merge),
		"mergeOverwrite":     b.mergeGuarded(sprigCounted().mergeOverwrite),
		"mustMerge":          b.mergeGuarded(sprigCounted().mustMerge),
		"mustMergeOverwrite": b.mergeGuarded(sprigCounted().mustMergeOverwrite),
		"uniq":               b.squareCharged("uniq", func(l any) (any, error) { return sprigCounted().all["uniq"].(func(any) []any)(l), nil }),
		"mustUniq":           b.squareCharged("mustUniq", func(l any) (any, error) { return sprigCounted().all["mustUniq"].(func(any) ([]any, error))(l) }),
		// derivePassword runs scrypt (32 MiB, tens of milliseconds): the
		// render's time is checked before each.
		"derivePassword": func(counter uint32, passwordType, password, user, site string) (string, error) {
			if err := b.check(); err != nil {
				return "", err
			}
			return sprigCounted().all["derivePassword"].(func(uint32, string, string, string, string) string)(counter, passwordType, password, user, site), nil
		},
		"without": func(l any, omit ...any) ([]any, error) {
			if err := b.spendWork(listLen(l), len(omit)); err != nil {
				return nil, err
			}
			return sprigCounted().all["without"].(func(any, ...any) []any)(l, omit...), nil
		},
		"mustWithout": func(l any, omit ...any) ([]any, error) {
			if err := b.spendWork(listLen(l), len(omit)); err != nil {
				return nil, err
			}
			return sprigCounted().all["mustWithout"].(func(any, ...any) ([]any, error))(l, omit...)
		},
	}
}

// spendWork refuses a comparison of n elements with m each (uniq compares
// every element with those before it) that would take longer than writing
// what is left of the budget: a comparison costs about what a byte does.
func (b *budget) spendWork(n, m int) error {
	if float64(n)*float64(m) > float64(b.left) {
		return b.overBytes()
	}
	return b.check()
}

// squareCharged is uniq (or mustUniq), which compares each element of a
// list with every element kept before it, charged that work first.
func (b *budget) squareCharged(name string, uniq func(any) (any, error)) func(any) (any, error) {
	return func(l any) (any, error) {
		if err := b.spendWork(listLen(l), listLen(l)); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out, err := uniq(l)
		if err != nil {
			return nil, err
		}
		return out, b.spend(shallowSize(out))
	}
}

// mergeGuarded is merge (or mergeOverwrite, or their must forms), charged
// the entries it adds, refusing a merge that would make a dict hold itself.
func (b *budget) mergeGuarded(merge func(map[string]any, ...map[string]any) (any, error)) func(map[string]any, ...map[string]any) (any, error) {
	charged := b.mergeCharged(merge)
	return func(dst map[string]any, srcs ...map[string]any) (any, error) {
		if mergeHoldsItself(dst, srcs) {
			return nil, errors.New("merge: a source holds the dict merged into, or a dict within it that the merge changes; a value may not hold itself")
		}
		return charged(dst, srcs...)
	}
}

// mergeHoldsItself reports whether merging srcs into dst as sprig does
// (mergo: a key whose value is a dict in both merges into dst's; any other
// value of a source may be set in dst) would make a dict hold itself: a
// value the merge may set reaches a dict the merge changes. Any cycle the
// merge made would pass through such a value.
func mergeHoldsItself(dst map[string]any, srcs []map[string]any) bool {
	type pair struct{ d, s uintptr }
	changed, seen := map[uintptr]bool{}, map[pair]bool{}
	var added []any
	stack := make([]pair, 0, len(srcs))
	maps := map[uintptr]map[string]any{}
	push := func(d, s map[string]any) {
		p := pair{reflect.ValueOf(d).Pointer(), reflect.ValueOf(s).Pointer()}
		if !seen[p] {
			seen[p] = true
			maps[p.d], maps[p.s] = d, s
			stack = append(stack, p)
		}
	}
	for _, src := range srcs {
		push(dst, src)
	}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		changed[p.d] = true
		d, s := maps[p.d], maps[p.s]
		for k, v := range s {
			dv, inDst := d[k].(map[string]any)
			sv, isDict := v.(map[string]any)
			if inDst && isDict {
				push(dv, sv)
				continue
			}
			added = append(added, v)
		}
	}
	return slices.ContainsFunc(added, func(v any) bool { return reaches(v, changed) })
}

// reaches reports whether v is, or holds at any depth, one of dicts.
func reaches(v any, dicts map[uintptr]bool) bool {
	return walkDistinct(v, func(rv reflect.Value) bool {
		return rv.Kind() == reflect.Map && dicts[rv.Pointer()]
	})
}

// walkDistinct calls found on every list and dict of v, each once however
// often v holds it, until found returns true; it reports whether one did.
func walkDistinct(v any, found func(reflect.Value) bool) bool {
	type seenKey struct {
		ptr uintptr
		len int
	}
	seen := map[seenKey]bool{}
	stack := []reflect.Value{reflect.ValueOf(v)}
	for len(stack) > 0 {
		rv := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for (rv.Kind() == reflect.Interface || rv.Kind() == reflect.Pointer) && !rv.IsNil() {
			rv = rv.Elem()
		}
		if k := rv.Kind(); k != reflect.Map && k != reflect.Slice || rv.IsNil() {
			continue
		}
		key := seenKey{rv.Pointer(), rv.Len()}
		if seen[key] {
			continue
		}
		seen[key] = true
		if found(rv) {
			return true
		}
		if rv.Kind() == reflect.Slice {
			for i := range rv.Len() {
				stack = append(stack, rv.Index(i))
			}
			continue
		}
		for it := rv.MapRange(); it.Next(); {
			stack = append(stack, it.Value())
		}
	}
	return false
}

// fnPrinted is the function that instrument puts at the end of every
// action that prints: {{ ... | stencilPrinted FLAGS }}.
const fnPrinted = "stencilPrinted"

// How an action prints, for fnPrinted.
const (
	// printedAtLineStart: the action starts a line of its template.
	printedAtLineStart = 1 << iota
	// printedNested: the value is what include or tpl wrote, whose own
	// actions were checked where they printed.
	printedNested
	// printedOnOwnLine: the action's line in its source holds nothing
	// before it but spaces, as {{- toYaml .x | nindent 4 }}'s does.
	printedOnOwnLine
	// printedIndented: the value went through indent or nindent last: the
	// template put every line of it at the indentation it chose.
	printedIndented
	// printedYAML: the value is what toYaml wrote.
	printedYAML
	// printedOneLine: the value went through toJson last, which writes
	// one line, escaped but for U+0085: only its line breaks are checked.
	printedOneLine
)

// printChecks are the commands that end a checked action, by flags.
var printChecks = sync.OnceValues(func() (map[int]*parse.CommandNode, error) {
	calls := map[int]*parse.CommandNode{}
	for flags := range printedOneLine << 1 {
		probe, err := template.New("check").Funcs(template.FuncMap{fnPrinted: func(int, any) any { return nil }}).Parse(fmt.Sprintf("{{ . | %s %d }}", fnPrinted, flags))
		if err != nil {
			return nil, fmt.Errorf("preparing the print checks: %w", err)
		}
		pipe := probe.Root.Nodes[0].(*parse.ActionNode).Pipe
		calls[flags] = pipe.Cmds[len(pipe.Cmds)-1]
	}
	return calls, nil
})

// printedFuncs are the functions fnPrinted of an execution charging b: it
// passes the value on, to be printed as text/template prints it, when it
// fits what is left of the budget and, printed, neither starts a YAML
// document nor writes a line left of where it is printed (see
// [budget.escapesLine]). own are the strings of the kind's own (its
// chart's files) that may.
func printedFuncs(b *budget) template.FuncMap {
	const marker = "a printed value holds a YAML document marker (--- or ...) at the start of a line: values are data and cannot add a document; quote the value in the template (| quote) or indent it (| nindent)"
	check := func(flags int, v any) (any, error) {
		lineStart, nested := flags&printedAtLineStart != 0, flags&printedNested != 0
		printed := ""
		switch x := v.(type) {
		case string:
			if b.own[x] {
				return v, nil
			}
			printed = x
		case nil, bool, int, int64, float64:
			return v, nil
		default:
			if err := b.fits(0, v); err != nil {
				return v, err
			}
			// A list or a dict prints its strings as they are: measured,
			// it is cheap to print once more and check.
			printed = fmt.Sprint(v)
		}
		if oddBreak(printed) {
			return v, errors.New(b.naming(printed) + "a printed value holds a line break other than \\n or \\r\\n (a lone \\r, U+0085, U+2028 or U+2029), which YAML reads as one and indent does not: values are data and cannot add keys, items or objects")
		}
		if flags&printedOneLine != 0 {
			return v, nil
		}
		if !nested && startsDocument(printed, lineStart) {
			return v, errors.New(b.naming(printed) + marker)
		}
		if flags&printedIndented != 0 {
			return v, nil
		}
		if strings.ContainsAny(printed, flowSpecial) && b.inFlow() {
			return v, fmt.Errorf("%sa value printed inside a flow collection ({…} or […]) holds one of %s: values are data and cannot add keys or items; quote the value in the template (| quote)", b.naming(printed), flowSpecial)
		}
		if line, ok := b.escapesLine(printed, flags&printedOnOwnLine != 0, flags&printedYAML != 0); ok {
			return v, fmt.Errorf("%sa printed value breaks its line, and its line %d may be read outside the value (%s): values are data and cannot add keys, items or objects; quote the value in the template (| quote), or print it with toYaml | nindent", b.naming(printed), line, b.gen.quote(printed))
		}
		return v, nil
	}
	return template.FuncMap{fnPrinted: check}
}

// flowSpecial are the characters that end or separate a plain or quoted
// scalar inside a flow collection.
const flowSpecial = ",[]{}\"'#"

// inFlow: the output's line is inside a flow collection: it holds more
// '{' and '[' than '}' and ']', quoted ones aside.
func (b *budget) inFlow() bool {
	tail, _ := b.lineBefore()
	depth, quote := 0, rune(0)
	for _, r := range tail {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '"' || r == '\'':
			quote = r
		case r == '{' || r == '[':
			depth++
		case r == '}' || r == ']':
			depth--
		}
	}
	return depth > 0
}

// oddBreak: s holds a line break that YAML reads and sprig's indent and
// nindent do not see: a lone \r, U+0085, U+2028 or U+2029.
func oddBreak(s string) bool {
	if !strings.ContainsAny(s, "\r\u0085\u2028\u2029") {
		return false
	}
	return strings.ContainsAny(strings.ReplaceAll(s, "\r\n", "\n"), "\r\u0085\u2028\u2029")
}

// naming is "the value at <path>: ", the path of the resource's string
// that printed holds, or "" when there is none: a print check names the
// field the resource's author wrote, not only the template's line.
func (b *budget) naming(printed string) string {
	if p := valuePath(b.data, printed); p != "" {
		return "the value at " + p + ": "
	}
	return ""
}

// valuePath is where, in an execution's data (a chart's .Values, or the
// resource's spec), the string that printed holds is: the first string
// equal to printed, or else the first with a line break that printed
// holds. "" when none is.
func valuePath(data any, printed string) string {
	root, prefix := any(nil), ""
	switch d := data.(type) {
	case map[string]any:
		root, prefix = d["Values"], ".Values"
	case runtime.Object:
		if u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d); err == nil {
			root, prefix = u["spec"], "spec"
		}
	}
	var walk func(v any, at string, match func(string) bool) string
	walk = func(v any, at string, match func(string) bool) string {
		switch v := v.(type) {
		case string:
			if match(v) {
				return at
			}
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(v)) {
				if p := walk(v[k], at+"."+k, match); p != "" {
					return p
				}
			}
		case []any:
			for i, x := range v {
				if p := walk(x, fmt.Sprintf("%s[%d]", at, i), match); p != "" {
					return p
				}
			}
		}
		return ""
	}
	if p := walk(root, prefix, func(s string) bool { return s == printed }); p != "" {
		return p
	}
	return walk(root, prefix, func(s string) bool { return strings.ContainsAny(s, yamlBreaks) && strings.Contains(printed, s) })
}

// escapesLine reports whether s, printed where the template's output is
// now, writes a line (the first such, counted from 1) that may be read
// outside the value. Blank lines aside, a line of s may be indented:
//   - as far as the output's line it is printed on, or further, when s
//     starts that line (after spaces only), or when the action is on a line
//     of its own in its source ({{- toYaml .x | nindent 4 }}, ownLine), s
//     starts with a break and the line it follows holds no key or item
//     waiting for its value;
//   - further than that line, when s is toYaml's output (yaml): a block
//     scalar's lines; as far as it, when the line is a list item that
//     waits for its value ("- {{ toYaml . | indent 4 | trim }}"): the
//     item's keys;
//   - nowhere otherwise: a value printed after text on its line may not
//     break it, for YAML or for a template that splits its output in
//     lines.
//
// The indentation of an output's line counts a list item's dashes ("  -
// a: b" is indented 4). In an include's or tpl's output, before its first
// break, a value that starts the output is not checked: its caller checks
// that output where it prints it.
func (b *budget) escapesLine(s string, ownLine, yaml bool) (int, bool) {
	if !strings.ContainsAny(s, yamlBreaks) {
		return 0, false
	}
	tail, known := b.lineBefore()
	least, text := lineIndent(tail)
	if !known && text == "" {
		return 0, false
	}
	lines := splitLines(s)
	startsBlank := strings.TrimLeft(lines[0], " \t") == ""
	newLines := ownLine && startsBlank && !waitsForValue(text)
	// A helper's first line is printed where its caller prints it: its
	// column is not known, and neither rule below that trusts it holds.
	body := known && startsBlank && blockHeader(text) // s is the block scalar's text
	after := text != "" && !newLines && !body         // s continues a line that holds text
	for i, line := range lines[1:] {
		n := len(line) - len(strings.TrimLeft(line, " "))
		blank := strings.TrimLeft(line, " \t") == ""
		last := i == len(lines)-2
		switch {
		case body && (!blank || last) && n <= least: // a line that ends the scalar
			return i + 2, true
		case body:
			continue
		case after && !yaml:
			return i + 2, true // no break at all
		case blank && !last:
			continue
		case blank: // where what is printed next starts
			if n >= least {
				continue
			}
		case !after:
			if n >= least {
				continue
			}
		case n > least && known: // toYaml's block scalar
			continue
		case n == least && text == "-" && known: // toYaml's dict, the item's value
			continue
		}
		return i + 2, true
	}
	return 0, false
}

// splitLines splits s at YAML's line breaks (\r\n is one), keeping empty
// lines, the last one included.
func splitLines(s string) []string {
	var lines []string
	start := 0
	for i, r := range s {
		if i < start || !strings.ContainsRune(yamlBreaks, r) {
			continue
		}
		lines = append(lines, s[start:i])
		start = i + utf8.RuneLen(r)
		if r == '\r' && strings.HasPrefix(s[start:], "\n") {
			start++
		}
	}
	return append(lines, s[start:])
}

// lineIndent is the indentation of a line of YAML, list items' dashes
// included ("  - a: b" is indented 4), and the text past it.
func lineIndent(line string) (int, string) {
	rest := strings.TrimLeft(line, " ")
	for strings.HasPrefix(rest, "-") && (len(rest) == 1 || rest[1] == ' ') {
		rest = strings.TrimLeft(rest[1:], " ")
	}
	if rest == "" && strings.HasSuffix(strings.TrimRight(line, " "), "-") {
		return len(line), "-" // an item that waits for its value
	}
	return len(line) - len(rest), strings.TrimRight(rest, " \t")
}

// blockHeader: a line of YAML that ends in a block scalar's header
// ("key: |", "- >-"), whose text is the lines indented further.
func blockHeader(text string) bool {
	if i := strings.Index(text, " #"); i >= 0 {
		text = strings.TrimRight(text[:i], " \t")
	}
	text = strings.TrimRight(text, "+-0123456789")
	if !strings.HasSuffix(text, "|") && !strings.HasSuffix(text, ">") {
		return false
	}
	return len(text) == 1 || text[len(text)-2] == ' '
}

// waitsForValue: a line of YAML that ends in a key, an item or a block
// scalar's header waits for its value.
func waitsForValue(text string) bool {
	if i := strings.Index(text, " #"); i >= 0 {
		text = strings.TrimRight(text[:i], " \t")
	}
	text = strings.TrimRight(text, "+-0123456789")
	return strings.HasSuffix(text, ":") || strings.HasSuffix(text, "|") || strings.HasSuffix(text, ">") || text == "" || text == "?"
}

// lineBefore is the line the template's output ends in now, and whether
// where it starts is known: in an include's or tpl's output, before its
// first break, it is not (the output is printed where its caller prints
// it).
func (b *budget) lineBefore() (string, bool) {
	if b.out == nil {
		return "", false
	}
	out := b.out.Bytes()
	i := bytes.LastIndexAny(out, yamlBreaks)
	if i < 0 {
		return string(out), !b.outNested
	}
	_, size := utf8.DecodeRune(out[i:])
	return string(out[i+size:]), true
}

// startsDocument reports whether s, printed into a template's output, could
// start or end a YAML document: a line of s that is a marker ("---" or
// "..." alone, or before a space or a comment), or a last line that the
// next value could complete into one ("-", "--", ".", ".."). The first line
// counts only when s is printed at the start of a line (lineStart).
func startsDocument(s string, lineStart bool) bool {
	if !strings.ContainsAny(s, yamlBreaks) && !lineStart {
		return false
	}
	lines := strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune(yamlBreaks, r) })
	if strings.IndexAny(s, yamlBreaks) == 0 {
		lines = append([]string{""}, lines...) // FieldsFunc drops the empty first line
	}
	if !lineStart && len(lines) > 0 {
		lines = lines[1:]
	}
	for i, line := range lines {
		if isMarker(line) || i == len(lines)-1 && isMarkerPrefix(line) {
			return true
		}
	}
	return false
}

// yamlBreaks are the characters YAML breaks a line at.
const yamlBreaks = "\n\r\u0085\u2028\u2029"

func isMarker(line string) bool {
	if !strings.HasPrefix(line, "---") && !strings.HasPrefix(line, "...") {
		return false
	}
	rest := line[3:]
	return rest == "" || rest[0] == ' ' || rest[0] == '\t' || rest[0] == '#'
}

func isMarkerPrefix(line string) bool {
	switch line {
	case "-", "--", ".", "..":
		return true
	}
	return false
}

// addPrintChecks ends the pipeline of every action of ts that prints (one
// that declares no variable) with fnPrinted, flagged with how the action
// prints (see [printFlags]): the value is checked before text/template
// prints it. sources are the templates'
// texts by parse name; an action of a template whose text is not there is
// checked as one printed after text on its line.
func addPrintChecks(sources map[string]string, ts ...*template.Template) error {
	calls, err := printChecks()
	if err != nil {
		return err
	}
	for _, tmpl := range ts {
		if tmpl.Tree == nil || tmpl.Root == nil {
			continue
		}
		src, known := sources[tmpl.ParseName]
		walkLists(tmpl.Root, func(list *parse.ListNode) {
			lineStart := true // a list may start a line: assume it does
			for _, n := range list.Nodes {
				switch n := n.(type) {
				case *parse.TextNode:
					if len(n.Text) > 0 {
						last, _ := utf8.DecodeLastRune(n.Text)
						lineStart = strings.ContainsRune(yamlBreaks, last)
					}
					continue
				case *parse.ActionNode:
					if len(n.Pipe.Decl) > 0 || isTick(n.Pipe) {
						continue // prints nothing
					}
					if flags, ok := printFlags(n.Pipe, lineStart); ok {
						if known && onOwnLine(src, int(n.Pos)) {
							flags |= printedOnOwnLine
						}
						n.Pipe.Cmds = append(n.Pipe.Cmds, calls[flags].Copy().(*parse.CommandNode))
					}
					// What it printed may have ended a line: the next
					// action may start one.
					lineStart = true
					continue
				}
				lineStart = true // after an if, a range, an include: who knows
			}
		})
	}
	return nil
}

// onOwnLine: the action at pos (its first token) in src is the first
// thing on its line but spaces and tabs.
func onOwnLine(src string, pos int) bool {
	if pos > len(src) {
		return false
	}
	open := strings.LastIndex(src[:min(pos+2, len(src))], "{{")
	if open < 0 {
		return false
	}
	start := strings.LastIndexByte(src[:open], '\n') + 1
	return strings.TrimLeft(src[start:open], " \t") == ""
}

// printFlags are fnPrinted's flags for the pipeline p, an action starting
// a line of its template's output (lineStart) or not; false when p's
// value is not checked where it prints: its last command is quote, the
// time check, or a check already.
func printFlags(p *parse.PipeNode, lineStart bool) (int, bool) {
	flags := 0
	if lineStart {
		flags |= printedAtLineStart
	}
	if yamlTrimmed(p.Cmds) {
		return flags | printedYAML, true
	}
	id, ok := p.Cmds[len(p.Cmds)-1].Args[0].(*parse.IdentifierNode)
	if !ok {
		return flags, true
	}
	switch id.Ident {
	case tick, fnPrinted, "quote": // quote escapes every break (strconv.Quote)
		return 0, false
	case "toJson", "mustToJson", "toRawJson", "mustToRawJson": // U+0085 stays
		return printedOneLine, true
	case "include", fnIncludeAt, "tpl":
		return flags | printedNested, true
	case "indent", "nindent":
		return flags | printedIndented, true
	case "toYaml", "mustToYaml", "toYamlPretty":
		return flags | printedYAML, true
	}
	return flags, true
}

// yamlTrimmed: the pipeline ends in toYaml | indent N | trim (or
// nindent), the idiom
// that prints a dict as a list item's value ("- {{ toYaml . | indent 4 |
// trim }}"): toYaml's output, its first line moved up beside the dash.
func yamlTrimmed(cmds []*parse.CommandNode) bool {
	if len(cmds) < 3 {
		return false
	}
	name := func(c *parse.CommandNode) string {
		if id, ok := c.Args[0].(*parse.IdentifierNode); ok {
			return id.Ident
		}
		return ""
	}
	n := len(cmds)
	switch name(cmds[n-3]) {
	case "toYaml", "mustToYaml", "toYamlPretty":
		indent := name(cmds[n-2])
		return (indent == "indent" || indent == "nindent") && name(cmds[n-1]) == "trim"
	}
	return false
}

// isTick: the pipeline is the time check, which prints nothing.
func isTick(p *parse.PipeNode) bool {
	id, ok := p.Cmds[len(p.Cmds)-1].Args[0].(*parse.IdentifierNode)
	return ok && id.Ident == tick
}

// walkLists calls f on every list of nodes under n, n's own included.
func walkLists(n parse.Node, f func(*parse.ListNode)) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		f(n)
		for _, c := range n.Nodes {
			walkLists(c, f)
		}
	case *parse.RangeNode:
		walkLists(n.List, f)
		walkLists(n.ElseList, f)
	case *parse.IfNode:
		walkLists(n.List, f)
		walkLists(n.ElseList, f)
	case *parse.WithNode:
		walkLists(n.List, f)
		walkLists(n.ElseList, f)
	}
}

// loadGuards reads what the guards need of a kind, once its chart is
// loaded: its tpl policy and its own strings.
func (k *Kind) loadGuards() error {
	var err error
	if k.tpl.tplValues, err = tplValues(k.declaration.Tpl, k.chart != nil); err != nil {
		return fmt.Errorf("%s: %w", declarationFile, err)
	}
	k.tpl.own = k.chart.ownStrings()
	k.tpl.ownActions = actionsOf(k.tpl.own)
	for _, ns := range k.declaration.Namespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("%s: namespaces: %q: %s", declarationFile, ns, strings.Join(errs, "; "))
		}
	}
	return nil
}

// tplPolicy is what tpl may run in a kind's templates: the kind's own
// strings always, and any string when tplValues.
type tplPolicy struct {
	// own are the kind's own strings (a chart's values and files) that
	// may print a YAML document marker and that tpl runs whatever the
	// kind's tpl policy (see [chart.ownStrings]).
	own map[string]bool
	// ownActions are the template actions of own (see [actionsOf]).
	ownActions map[string]bool
	// tplValues: tpl runs any string, the values' too (a kind's tpl: any).
	tplValues bool
}

// actionsOf are the template actions of the strings own that hold any,
// by [actionKeys]: a string of the values whose actions are all among
// them runs no template a chart's own strings do not (a chart's values
// passed to tpl through toYaml, say, with a tenant's text among them).
func actionsOf(own map[string]bool) map[string]bool {
	actions := map[string]bool{}
	for s := range own {
		if !strings.Contains(s, "{{") {
			continue
		}
		keys, err := actionKeys(s)
		if err != nil {
			continue // not a template: tpl would fail on it anyway
		}
		for _, k := range keys {
			actions[k] = true
		}
	}
	return actions
}

// actionKeys parses src as a template (whatever functions it names) and
// returns each of its actions and control structures, as a string that
// says what it runs.
func actionKeys(src string) ([]string, error) {
	tree := parse.New("tpl")
	tree.Mode = parse.SkipFuncCheck
	trees := map[string]*parse.Tree{}
	if _, err := tree.Parse(src, "{{", "}}", trees); err != nil {
		return nil, err
	}
	var keys []string
	var walk func(n parse.Node)
	walk = func(n parse.Node) {
		switch n := n.(type) {
		case *parse.ListNode:
			if n == nil {
				return
			}
			for _, c := range n.Nodes {
				walk(c)
			}
		case *parse.ActionNode, *parse.TemplateNode:
			keys = append(keys, fmt.Sprintf("%T %s", n, n))
		case *parse.IfNode:
			keys = append(keys, "if "+n.Pipe.String())
			walk(n.List)
			walk(n.ElseList)
		case *parse.RangeNode:
			keys = append(keys, "range "+n.Pipe.String())
			walk(n.List)
			walk(n.ElseList)
		case *parse.WithNode:
			keys = append(keys, "with "+n.Pipe.String())
			walk(n.List)
			walk(n.ElseList)
		}
	}
	for name, t := range trees {
		if name != "tpl" {
			keys = append(keys, "define "+name) // a template of its own
		}
		walk(t.Root)
	}
	return keys, nil
}

// ownTemplate: every action of src is one of the kind's own strings'.
func (b *budget) ownTemplate(src string) bool {
	if len(b.ownActions) == 0 {
		return false
	}
	keys, err := actionKeys(src)
	if err != nil {
		return false
	}
	for _, k := range keys {
		if !b.ownActions[k] {
			return false
		}
	}
	return true
}

// tplValues is what a kind's tpl policy (Declaration.Tpl) says of its
// resources' values: whether tpl runs them. Unset, it does for kinds that
// are not charts.
func tplValues(policy string, chart bool) (bool, error) {
	switch policy {
	case "":
		return !chart, nil
	case TplOwn:
		return false, nil
	case TplAny:
		return true, nil
	}
	return false, fmt.Errorf("tpl: %q is not %q or %q", policy, TplOwn, TplAny)
}

// ownStrings are a chart's own strings, which tpl runs whatever the kind's
// tpl policy and which may hold a YAML document marker: the strings of its
// values and of its subcharts' (those a template could pass to tpl), and
// its files (.Files.Get). nil for a kind that is not a chart.
func (c *chart) ownStrings() map[string]bool {
	if c == nil {
		return nil
	}
	own := map[string]bool{}
	var add func(v any)
	add = func(v any) {
		switch v := v.(type) {
		case string:
			own[v] = true
		case map[string]any:
			for _, e := range v {
				add(e)
			}
		case []any:
			for _, e := range v {
				add(e)
			}
		}
	}
	for _, ch := range append([]*chart{c}, slices.Collect(maps.Values(c.subcharts))...) {
		add(ch.values)
		for _, f := range ch.files {
			own[string(f)] = true
		}
	}
	return own
}
