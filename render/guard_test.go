package render

import (
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"text/template"
	"time"
)

// linearFuncs are the template functions that run unguarded: each
// allocates and works at most in proportion to its arguments (which were
// charged when they were made, or are the resource's own, bounded by the
// API server), or a constant. A function added to the library, by sprig or
// by stencil, fails TestEveryFunctionIsBounded until it is guarded or
// listed here, with its reason.
var linearFuncs = map[string]string{
	// text/template's builtins, but for the printing ones.
	"and": "returns an argument", "or": "returns an argument", "not": "a bool", "call": "calls a function value; the data holds none",
	"index": "returns an element", "slice": "shares its argument", "len": "a number",
	"eq": "compares basic values", "ne": "compares basic values", "lt": "compares basic values", "le": "compares basic values", "gt": "compares basic values", "ge": "compares basic values",
	// Numbers, in and out.
	"add": "number", "add1": "number", "add1f": "number", "addf": "number", "sub": "number", "subf": "number", "mul": "number", "mulf": "number",
	"div": "number", "divf": "number", "mod": "number", "max": "number", "maxf": "number", "min": "number", "minf": "number", "biggest": "number",
	"ceil": "number", "floor": "number", "round": "number", "int": "number", "int64": "number", "float64": "number", "atoi": "number", "toDecimal": "number",
	// Strings no longer than their input, or by a constant.
	"abbrev": "no longer than its input", "abbrevboth": "no longer than its input", "trunc": "no longer than its input", "substr": "no longer than its input",
	"initials": "no longer than its input", "camelcase": "no longer than its input", "kebabcase": "input and a dash per word", "snakecase": "input and an underscore per word",
	"swapcase": "as long as its input", "untitle": "as long as its input", "trimAll": "no longer than its input", "trimall": "no longer than its input",
	"trimPrefix": "no longer than its input", "trimSuffix": "no longer than its input", "plural": "returns an argument", "hello": "a constant",
	"b32dec": "shorter than its input", "b64dec": "shorter than its input", "adler32sum": "a constant", "sha1sum": "a constant", "sha256sum": "a constant", "sha512sum": "a constant",
	"base": "no longer than its input", "dir": "no longer than its input", "ext": "no longer than its input", "clean": "no longer than its input", "isAbs": "a bool",
	"osBase": "no longer than its input", "osDir": "no longer than its input", "osExt": "no longer than its input", "osClean": "no longer than its input", "osIsAbs": "a bool",
	"urlJoin": "as long as its input", "urlParse": "as long as its input", "decryptAES": "no longer than its input",
	"regexFind": "a match of its input (RE2: linear time)", "mustRegexFind": "a match of its input (RE2: linear time)",
	"regexMatch": "a bool (RE2: linear time)", "mustRegexMatch": "a bool (RE2: linear time)", "regexQuoteMeta": "twice its input at most",
	"contains": "a bool", "hasPrefix": "a bool", "hasSuffix": "a bool",
	// Values: returned, looked up or compared, not built.
	"default": "returns an argument", "coalesce": "returns an argument", "ternary": "returns an argument", "empty": "a bool", "all": "a bool", "any": "a bool",
	"first": "returns an element", "mustFirst": "returns an element", "last": "returns an element", "mustLast": "returns an element", "mustSlice": "shares its argument",
	"dig": "returns an element", "get": "returns an element", "hasKey": "a bool", "unset": "removes an entry in place",
	"has": "compares each element once (reflect.DeepEqual visits a shared part once)", "mustHas": "compares each element once", "deepEqual": "visits a shared part once",
	"kindIs": "a bool", "kindOf": "a constant", "typeIs": "a bool", "typeIsLike": "a bool", "typeOf": "a constant",
	"semver": "parses its input", "semverCompare": "parses its input", "toDate": "parses its input", "mustToDate": "parses its input",
	"duration": "a constant", "durationRound": "a constant", "required": "returns an argument", "fail": "an error of its argument",
	// stencil's own.
	"ownerLabels": "two labels", "need": "returns an argument",
}

// TestEveryFunctionIsBounded: every function a template can call (the
// library, a chart kind's, text/template's builtins) is guarded (metered,
// measured before it prints, or checked for structures that hold
// themselves: meteredFuncs), refused (impure), or listed in linearFuncs.
func TestEveryFunctionIsBounded(t *testing.T) {
	c := template.New("x")
	names := map[string]any{}
	for n := range funcs(c) {
		names[n] = nil
	}
	for n := range chartFuncs() {
		names[n] = nil
	}
	for _, builtin := range []string{"and", "or", "not", "len", "index", "slice", "call", "eq", "ne", "lt", "le", "gt", "ge", "html", "js", "urlquery", "print", "printf", "println"} {
		names[builtin] = nil
	}
	guarded := meteredFuncs(c, &budget{})
	for _, name := range slices.Sorted(maps.Keys(names)) {
		_, isGuarded := guarded[name]
		_, isLinear := linearFuncs[name]
		switch {
		case isGuarded && isLinear:
			t.Errorf("%s is guarded and listed in linearFuncs: take it out of the list", name)
		case !isGuarded && !isLinear && !slices.Contains(impure, name):
			t.Errorf("%s is neither guarded nor listed in linearFuncs: guard it (limits.go, guard.go) or list it with why it is bounded", name)
		}
	}
	for name := range linearFuncs {
		if _, ok := names[name]; !ok {
			t.Errorf("linearFuncs lists %s, which templates no longer have", name)
		}
	}
}

// TestPrintGuards: each way a template prints a value is measured first: a
// structure that would print past the budget, or that holds itself,
// fails the render with a LimitError, quickly and without allocating what
// it would print.
func TestPrintGuards(t *testing.T) {
	const doubled = `{{ $l := list "xxxxxxxx" }}{{ range until 24 }}{{ $l = list $l $l }}{{ end }}`
	tests := []struct{ name, src, limit string }{
		{"an action", doubled + `{{ $l }}`, "rendered bytes"},
		{"print", doubled + `{{ $_ := print $l }}`, "rendered bytes"},
		{"printf %v", doubled + `{{ $_ := printf "%v" $l }}`, "rendered bytes"},
		{"printf width", `{{ $_ := printf "%2000000000d" 1 }}`, "rendered bytes"},
		{"printf precision", `{{ $_ := printf "%.2000000000f" 1.0 }}`, "rendered bytes"},
		{"printf width argument", `{{ $_ := printf "%*d" 2000000000 1 }}`, "rendered bytes"},
		{"printf width past an int", `{{ $_ := printf "%99999999999999999999d" 1 }}`, "rendered bytes"},
		{"toYaml", doubled + `{{ $_ := toYaml $l }}`, "rendered bytes"},
		{"toJson", doubled + `{{ $_ := toJson $l }}`, "rendered bytes"},
		{"toPrettyJson", doubled + `{{ $_ := toPrettyJson $l }}`, "rendered bytes"},
		{"quote", doubled + `{{ $_ := quote $l }}`, "rendered bytes"},
		{"cat", doubled + `{{ $_ := cat $l }}`, "rendered bytes"},
		{"toString", doubled + `{{ $_ := toString $l }}`, "rendered bytes"},
		{"join", doubled + `{{ $_ := join "," (list $l) }}`, "rendered bytes"},
		{"html", doubled + `{{ $_ := html $l }}`, "rendered bytes"},
		{"js", doubled + `{{ $_ := js $l }}`, "rendered bytes"},
		{"urlquery", doubled + `{{ $_ := urlquery $l }}`, "rendered bytes"},
		{"toStrings", doubled + `{{ $_ := toStrings (list $l) }}`, "rendered bytes"},
		{"sortAlpha", doubled + `{{ $_ := sortAlpha (list $l) }}`, "rendered bytes"},
		{"uniq", `{{ $_ := uniq (until 100000) }}`, "rendered bytes"},
		{"without", `{{ $_ := without (until 100000) 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 }}`, "rendered bytes"},
		{"nesting", `{{ $l := list 1 }}{{ range until 1100 }}{{ $l = list $l }}{{ end }}{{ $_ := toJson $l }}`, "value nesting"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := instrumented(t, tt.src, Limits{Steps: DefaultSteps, Time: time.Second, Bytes: 1 << 20, Objects: 10, StatusBytes: 1})
			_, err := e.execute("t", nil)
			limit, ok := errors.AsType[*LimitError](err)
			if !ok || limit.Limit != tt.limit {
				t.Fatalf("error %v, want a LimitError on %s", err, tt.limit)
			}
		})
	}
}

// TestNoStructureHoldsItself: set and the merges refuse to make a dict hold
// itself, directly or through a list or another dict.
func TestNoStructureHoldsItself(t *testing.T) {
	tests := []struct{ name, src string }{
		{"set itself", `{{ $m := dict }}{{ $_ := set $m "a" $m }}`},
		{"set a list that holds it", `{{ $m := dict }}{{ $_ := set $m "a" (list 1 $m) }}`},
		{"set into a dict it holds", `{{ $m := dict }}{{ $n := dict "m" $m }}{{ $_ := set $m "n" $n }}`},
		{"merge itself", `{{ $m := dict "x" 1 }}{{ $_ := merge $m (dict "y" $m) }}`},
		{"mergeOverwrite into an inner dict", `{{ $in := dict }}{{ $m := dict "in" $in }}{{ $_ := mergeOverwrite $m (dict "in" (dict "back" (list $in))) }}`},
		{"mustMerge itself", `{{ $m := dict "x" 1 }}{{ $_ := mustMerge $m (dict "y" (dict "z" $m)) }}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl, err := template.New("t").Funcs(funcs(template.New("t"))).Parse(tt.src)
			if err != nil {
				t.Fatal(err)
			}
			e, err := newExecutions(tmpl).get(DefaultLimits, 1<<20, "rendered bytes")
			if err != nil {
				t.Fatal(err)
			}
			if _, err = e.execute("t", nil); err == nil || !strings.Contains(err.Error(), "may not hold itself") {
				t.Fatalf("error %v, want one saying a value may not hold itself", err)
			}
		})
	}
	// Sharing a part is not holding oneself.
	tmpl := template.Must(template.New("t").Funcs(funcs(template.New("t"))).Parse(`{{ $p := dict "k" 1 }}{{ $m := dict }}{{ $_ := set $m "a" $p }}{{ $_ := set $m "b" $p }}{{ $_ := merge (dict) $m $m }}{{ toJson $m }}`))
	e, err := newExecutions(tmpl).get(DefaultLimits, 1<<20, "rendered bytes")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := e.execute("t", nil); err != nil || string(out) != `{"a":{"k":1},"b":{"k":1}}` {
		t.Fatalf("a dict that shares a part: %q, %v", out, err)
	}
}

// TestStartsDocument: a printed value may not hold a line that starts or
// ends a YAML document, nor end on the start of one.
func TestStartsDocument(t *testing.T) {
	tests := []struct {
		s         string
		lineStart bool
		want      bool
	}{
		{"plain", true, false},
		{"---", false, false}, // in the middle of a line
		{"---", true, true},
		{"...", true, true},
		{"--- # c", true, true},
		{"---x", true, false},
		{"a\n---\nb", false, true},
		{"a\n--- \nb", false, true},
		{"a\n...\n", false, true},
		{"a\n  ---\nb", false, false}, // indented: block scalar text
		{"a\n-", false, true},         // the next value may complete it
		{"a\n- b", false, false},
		{"a\r\n---\r\n", false, true},
		{"a\r---\rb", false, true},         // a bare carriage return breaks a line too
		{"a\u2028...\u2028b", false, true}, // and so do Unicode's line and paragraph separators
		{"\n---", false, true},
	}
	for _, tt := range tests {
		if got := startsDocument(tt.s, tt.lineStart); got != tt.want {
			t.Errorf("startsDocument(%q, %v) = %v, want %v", tt.s, tt.lineStart, got, tt.want)
		}
	}
}

// TestPrintedValuesAddNoDocument: however a value is printed (a string, a
// dict or list that holds one, two values side by side), it cannot start a
// YAML document of its own.
func TestPrintedValuesAddNoDocument(t *testing.T) {
	const doc = "x\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: injected}"
	tests := []struct {
		name, src string
		data      map[string]any
	}{
		{"a string", "data: {{ .a }}", map[string]any{"a": doc}},
		{"a dict that holds one", "data: {{ .a }}", map[string]any{"a": map[string]any{"k": doc}}},
		{"a list that holds one", "data: {{ .a }}", map[string]any{"a": []any{doc}}},
		{"two values side by side", "data: {{ .a }}{{ .b }}", map[string]any{"a": "x\n", "b": "---\nkind: Secret"}},
		{"a bare carriage return", "data: {{ .a }}", map[string]any{"a": "x\r...\rkind: Secret"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := instrumented(t, tt.src, DefaultLimits)
			if out, err := e.execute("t", tt.data); err == nil || !strings.Contains(err.Error(), "values are data and cannot add") {
				t.Fatalf("printed %q, error %v; want one saying values cannot add a document", out, err)
			}
		})
	}
}

// TestPrintedValuesStayInTheirPlace: a printed value's lines stay inside
// the value, wherever the template prints it: after a key, beside another
// value, through a helper or squote, or on a line of its own with {{- }}
// trimming the line's spaces. What charts print as structure (toYaml |
// nindent, indent, a line of its own at its column, a block scalar) still
// prints.
func TestPrintedValuesStayInTheirPlace(t *testing.T) {
	const helpers = `{{- define "img" }}{{ .a }}{{ end }}{{- define "arg" }}--a={{ .a }}{{ end }}{{- define "labels" }}app: x
{{ .a }}{{ end }}{{- define "conf" }}
    {{ .a }}{{ end }}`
	tests := []struct {
		name, src string
		a         any
		escapes   bool
	}{
		{"a key after a scalar", "spec:\n  image: {{ .a }}\n", "x\n  privileged: true", true},
		{"a key left of a scalar", "spec:\n  image: {{ .a }}\n", "x\nkind: ClusterRole", true},
		{"a value that starts with a break", "spec:\n  image: {{ .a }}\n", "\n  privileged: true", true},
		{"two values side by side", "spec:\n  image: {{ .b }}{{ .a }}\n", "\n  privileged: true", true},
		{"through a helper", "spec:\n  image: {{ include \"img\" . }}\n", "x\n  privileged: true", true},
		{"in single quotes", "spec:\n  image: {{ squote .a }}\n", "x'\n  privileged: true\n  y: '", true},
		{"trimmed, left of its column", "metadata:\n  labels:\n    app: x\n    {{- .a }}\n", "\n  namespace: other", true},
		{"a key of a list item", "ports:\n  - port: {{ .a }}\n", "x\n    injected: true", true},
		{"a list item's key waiting", "ports:\n  - port:\n    {{- .a }}\n", "\n    injected: true", true},
		{"a line of a helper's output, split", "args:\n{{- range splitList \"\\n\" (include \"arg\" .) }}\n  - {{ quote . }}\n{{- end }}\n", "x\n  --injected", true},
		{"a folded scalar", "spec:\n  image: {{ .a }}\n", "x\n    y", true},
		{"a dict's string", "spec:\n  image: {{ .a }}\n", map[string]any{"k": "x\nkind: ClusterRole"}, true},
		{"a lone CR through nindent", "metadata:\n  labels:\n    {{- .a | nindent 4 }}\n", "k: v\rdata: {evil: x}", true},
		{"U+2028 through toYaml | nindent", "data:\n  c.yaml: |\n    {{- toYaml .a | nindent 4 }}\n  other: chart\n", map[string]any{"k": "x\u2028other: evil"}, true},
		{"U+0085 through toJson", "data:\n  c.json: |\n    {{ toJson .a }}\n", map[string]any{"k": "x\u0085immutable: true"}, true},
		{"a break at the end, then a key", "data:\n  a: {{ .a }}{{ .b }}\n", "x\n  ", true},
		{"a line of its own that ends left of it", "metadata:\n  {{ .a }}{{ .b }}\n", "x: y\n", true},
		{"a key after a comment", "metadata:\n  labels: # team\n  {{- .a }}\n", "\n  evil: x", true},
		{"inside a flow mapping", "data: {a: \"{{ .a }}\"}\n", "x\", evil: \"y", true},
		{"quoted inside a flow mapping", "data: {a: {{ .a | quote }}}\n", "x\", evil: \"y", false},
		{"CRLF", "data:\n  a.txt: |\n{{ .a | indent 4 }}\n", "line 1\r\nline 2", false},
		{"toYaml | nindent after a key", "metadata:\n  labels:\n    {{- toYaml .a | nindent 4 }}\n", map[string]any{"k": "v", "l": "w"}, false},
		{"toYaml | nindent after a pair", "metadata:\n  labels:\n    app: x\n    {{- toYaml .a | nindent 4 }}\n", map[string]any{"k": "v"}, false},
		{"nindent left of the line before", "probe:\n  httpGet:\n    scheme: HTTP\n    {{- toYaml .a | nindent 2 }}\n", map[string]any{"k": "v"}, false},
		{"a helper | nindent", "metadata:\n  labels:\n    {{- include \"labels\" . | nindent 4 }}\n", "k: v\nkind: ClusterRole", false},
		{"toYaml | indent | trim as a list item", "affinity:\n  terms:\n    - {{ toYaml .a | indent 6 | trim }}\n", map[string]any{"labelSelector": map[string]any{"matchLabels": map[string]any{"k": "v"}}, "topologyKey": "x"}, false},
		{"toYaml | indent | trim left of the item", "affinity:\n  terms:\n    - {{ toYaml .a | indent 2 | trim }}\n", map[string]any{"x": "y", "kind": "ClusterRole"}, true},
		{"toYaml | nindent | trim as a list item", "spread:\n  - {{ toYaml .a | nindent 4 | trim }}\n", map[string]any{"maxSkew": 1, "topologyKey": "x"}, false},
		{"a helper's text in a block scalar", "data:\n  a.conf: |\n  {{- include \"conf\" . }}\n", "port 1\n    dir x", false},
		{"a value's line that ends a block scalar", "data:\n  a.conf: |\n  {{- .a }}\n", "\n    port 1\n  evil: x", true},
		{"indent at column 0", "data:\n  a.txt: |\n{{ .a | indent 4 }}\n", "line 1\nline 2", false},
		{"a line of its own, at its column", "metadata:\n  labels:\n    {{ .a }}\n", "k: v\n    l: w", false},
		{"toYaml of a string with breaks", "a.txt: {{ toYaml .a }}\n", "line 1\nline 2", false},
		{"a quoted string with breaks", "data:\n  a.txt: {{ quote .a }}\n", "x\nkind: ClusterRole", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := instrumented(t, helpers+tt.src, DefaultLimits)
			out, err := e.execute("t", map[string]any{"a": tt.a, "b": "x"})
			if escaped := err != nil && strings.Contains(err.Error(), "values are data and cannot add keys"); escaped != tt.escapes {
				t.Fatalf("printed %q, error %v; want an error about the value's lines: %v", out, err, tt.escapes)
			}
		})
	}
}

// TestKindsWritten: a file's kinds are the literal kinds that it and the
// helpers write at the top level; a kind that is not literal, or a file
// that writes none, leaves the file free.
func TestKindsWritten(t *testing.T) {
	tests := []struct {
		name    string
		texts   map[string]string
		helpers string
		want    map[string][]string
	}{
		{"literal", map[string]string{"a.yaml": "kind: ConfigMap\n---\nkind: 'Secret' # two\n"}, "", map[string][]string{"a.yaml": {"ConfigMap", "Secret"}}},
		{"with the helpers'", map[string]string{"a.yaml": "kind: Service\n"}, "{{ define \"x\" }}\nkind: Deployment\n{{ end }}", map[string][]string{"a.yaml": {"Deployment", "Service"}}},
		{"nested kinds do not count", map[string]string{"a.yaml": "kind: RoleBinding\nroleRef:\n  kind: Role\n"}, "", map[string][]string{"a.yaml": {"RoleBinding"}}},
		{"a kind from a value", map[string]string{"a.yaml": "kind: {{ .Values.kind }}\n", "b.yaml": "kind: Service\n"}, "", map[string][]string{"b.yaml": {"Service"}}},
		{"no kind", map[string]string{"a.yaml": "{{ range .Values.extraObjects }}\n---\n{{ tpl (toYaml .) $ }}\n{{ end }}"}, "", map[string][]string{}},
		{"a list", map[string]string{"a.yaml": "kind: List\nitems: []\n"}, "", map[string][]string{}},
		{"CRLF", map[string]string{"a.yaml": "kind: Service\r\nmetadata: {}\r\n"}, "", map[string][]string{"a.yaml": {"Service"}}},
		{"a helper's kind from a value", map[string]string{"a.yaml": "kind: Service\n"}, "kind: {{ .kind }}\n", map[string][]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := kindsWritten(tt.texts, tt.helpers); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("kindsWritten = %v, want %v", got, tt.want)
			}
		})
	}
}

// instrumented parses src as the template "t" with the template functions,
// instruments every template it defines as Load does, and returns an
// execution of it within limits (1 MiB of output).
func instrumented(t *testing.T, src string, limits Limits) *execution {
	t.Helper()
	tmpl := template.New("t")
	tmpl, err := tmpl.Funcs(funcs(tmpl)).Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := instrument(map[string]string{"t": src}, tmpl.Templates()...); err != nil {
		t.Fatal(err)
	}
	e, err := newExecutions(tmpl).get(limits, 1<<20, "rendered bytes")
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestPrintedInHelpersAndBodies: the rules for a block scalar's text and
// for toYaml's dict as a list item's value trust the column of the line
// they follow: never a helper's first line, printed where its caller
// prints it; and a block scalar's text may not end where a key beside its
// header would start.
func TestPrintedInHelpersAndBodies(t *testing.T) {
	const helpers = `{{- define "files" -}}
a.conf: |
{{- .a }}
{{- end }}{{- define "item" -}}
- {{ toYaml .a | indent 2 | trim }}
{{- end }}{{- define "kv" -}}
k: {{ toYaml .a }}
{{- end }}`
	tests := []struct {
		name, src string
		data      map[string]any
	}{
		// blockHeader trusts least from a helper's first line (known ==
		// false); the caller prints the helper at column 2, so only that
		// line moves.
		{"a helper's header printed at column 2", "spec:\n  {{ include \"files\" . }}\n", map[string]any{"a": "\n  hostNetwork: true"}},
		// the same for text == "-".
		{"a helper's item printed at column 2", "spec:\n  terms:\n  {{ include \"item\" . }}\n", map[string]any{"a": map[string]any{"a": 1, "hostNetwork": true}}},
		// a body that ends on a blank line at the header's column: the next
		// value starts a key beside the header's.
		// toYaml's block scalar in a helper's first line, printed at column 2.
		{"a helper's block scalar printed at column 2", "data:\n  {{ include \"kv\" . }}\n", map[string]any{"a": "x: 1\nevil: y"}},
		{"a body ending at the header's column", "data:\n  a.conf: |\n  {{- .a }}{{ .b }}\n", map[string]any{"a": "\n    x\n  ", "b": "evil: x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := instrumented(t, helpers+tt.src, DefaultLimits)
			out, err := e.execute("t", tt.data)
			if err == nil || !strings.Contains(err.Error(), "values are data and cannot add keys") {
				t.Fatalf("printed %q, error %v; want an error about the value's lines", out, err)
			}
		})
	}
}
