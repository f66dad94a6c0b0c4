package render

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"text/template"
	"time"
)

// TestListFuncsCharged: a function that builds a list or a dict is charged
// what it makes, whatever its input: the table gives each call's charge in
// bytes (elemBytes, 8, an element or entry).
func TestListFuncsCharged(t *testing.T) {
	tests := []struct {
		name string
		src  string // assigns to $_, so that it writes nothing
		want int    // bytes charged
	}{
		{"list", `{{ $_ := list 1 2 3 }}`, 24},
		{"dict", `{{ $_ := dict "a" 1 "b" 2 }}`, 16},
		// append copies the list it appends to.
		{"append", `{{ $_ := append (list 1 2) 3 }}`, 16 + 24},
		{"prepend", `{{ $_ := prepend (list 1 2) 3 }}`, 16 + 24},
		{"concat", `{{ $_ := concat (list 1 2) (list 3) }}`, 16 + 8 + 24},
		{"keys", `{{ $_ := keys (dict "a" 1 "b" 2) }}`, 16 + 16},
		{"splitList", `{{ $_ := splitList "," "a,b,c" }}`, 24},
		// set and merge add to a dict in place: charged what they add.
		{"set", `{{ $d := dict }}{{ $_ := set $d "a" 1 }}{{ $_ = set $d "b" 2 }}`, 8 + 8},
		{"merge", `{{ $_ := merge (dict) (dict "a" 1 "b" 2) }}`, 16 + 16},
		{"mergeOverwrite", `{{ $_ := mergeOverwrite (dict "a" 1) (dict "a" 2) }}`, 8 + 8 + 8},
		// A deep copy is charged every level, before it is made.
		{"deepCopy", `{{ $_ := deepCopy (list (list 1 2) 3) }}`, 16 + 16 + 32},
		{"deepCopy of a shared list", `{{ $l := list 1 1 }}{{ $_ := deepCopy (list $l $l) }}`, 16 + 16 + 48},
		{"chunk", `{{ $_ := chunk 2 (list 1 2 3) }}`, 24 + 40},
		{"fromJson", `{{ $_ := fromJson "{\"a\": [1, 2]}" }}`, 24},
		// Reading a list or a dict is free: only the list made is charged.
		{"first", `{{ $_ := first (list 1 2) }}`, 16},
		{"get", `{{ $_ := get (dict "a" 1) "a" }}`, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl := template.New("set")
			if _, err := tmpl.Funcs(funcs(tmpl)).New("t").Parse(tt.src); err != nil {
				t.Fatal(err)
			}
			b := &budget{}
			run, err := metered(tmpl, b)
			if err != nil {
				t.Fatal(err)
			}
			const budgetBytes = 1000
			b.reset(Limits{Steps: DefaultSteps, Time: time.Minute}, budgetBytes, "rendered bytes")
			if err := run.ExecuteTemplate(&strings.Builder{}, "t", nil); err != nil {
				t.Fatal(err)
			}
			if got := budgetBytes - b.left; got != tt.want {
				t.Errorf("charged %d bytes, want %d", got, tt.want)
			}
			b.reset(Limits{Steps: DefaultSteps, Time: time.Minute}, tt.want-1, "rendered bytes")
			err = run.ExecuteTemplate(&strings.Builder{}, "t", nil)
			if _, ok := errors.AsType[*LimitError](err); !ok {
				t.Errorf("with a byte less: %v, want a LimitError", err)
			}
		})
	}
}

// TestEveryListFuncCharged: every function of the library that returns a
// new list or dict is one that metered charges, or is left out here with
// the reason why; a function a newer sprig adds fails this test until it
// is one or the other.
func TestEveryListFuncCharged(t *testing.T) {
	free := map[string]string{
		"object":      "the live objects of a node, not a copy",
		"objects":     "the live objects of a node, not a copy",
		"ownerLabels": "two labels",
		"urlParse":    "a dict of a URL's few parts",
		"unset":       "removes an entry, in place",
		"lookup":      "always fails: a render reads no live object",
	}
	// Functions whose static result is any, that make a list or a dict.
	anyBuilders := []string{"concat", "merge", "mergeOverwrite", "mustMerge", "mustMergeOverwrite", "deepCopy", "mustDeepCopy", "fromJson", "mustFromJson"}
	charged := meteredFuncs(template.New(""), &budget{})
	for name, fn := range funcs(template.New("")) {
		out := reflect.TypeOf(fn).Out(0).Kind()
		builds := out == reflect.Slice || out == reflect.Map || slices.Contains(anyBuilders, name)
		if _, ok := charged[name]; builds && !ok && free[name] == "" {
			t.Errorf("%s returns a new list or dict, and metered does not charge it", name)
		}
	}
}
