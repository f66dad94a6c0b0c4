package render

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// decodeCases are output documents whose values take each branch of the
// direct conversion and of its fallback to the JSON round trip.
var decodeCases = map[string]string{
	"object":              "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, labels: {x: \"1\"}}\ndata: {k: v}\n",
	"integers":            "apiVersion: v1\nkind: Service\nspec: {ports: [{port: 80, targetPort: 8080}], big: 9223372036854775807, neg: -3}\n",
	"booleans and nulls":  "apiVersion: v1\nkind: A\nspec: {a: true, b: no, c: on, d: ~, e: null, f: yes}\n",
	"floats":              "apiVersion: v1\nkind: A\nspec: {a: 1.5, b: 3.0, c: 1e3, d: 1e21, e: -0.0, f: 1e-7}\n",
	"not a number":        "apiVersion: v1\nkind: A\nspec: {a: .nan}\n",
	"infinity":            "apiVersion: v1\nkind: A\nspec: {a: .inf}\n",
	"beyond int64":        "apiVersion: v1\nkind: A\nspec: {a: 18446744073709551615, b: 9223372036854775808}\n",
	"integer keys":        "apiVersion: v1\nkind: A\nspec: {1: a, true: b, 1.5: c}\n",
	"null key":            "apiVersion: v1\nkind: A\nspec: {~: a}\n",
	"binary":              "apiVersion: v1\nkind: A\nspec: {a: !!binary /w==}\n",
	"timestamp":           "apiVersion: v1\nkind: A\nspec: {a: 2001-12-14t21:59:43.10-05:00, b: 2002-12-14}\n",
	"empty collections":   "apiVersion: v1\nkind: A\nspec: {a: [], b: {}, c: [[]], d: [{}]}\n",
	"anchors":             "apiVersion: v1\nkind: A\nspec: {a: &x {b: 1}, c: *x, d: {<<: *x, e: 2}}\n",
	"duplicate keys":      "apiVersion: v1\nkind: A\nspec: {a: 1, a: 2}\n",
	"escapes":             "apiVersion: v1\nkind: A\nspec: {a: \"\\xff \\u00e9 <&> \\t\", b: '''q'''}\n",
	"strings like others": "apiVersion: v1\nkind: A\nspec: {a: \"1\", b: \"true\", c: \"null\", d: \"1.5\"}\n",
	"block scalars":       "apiVersion: v1\nkind: A\ndata:\n  a: |\n    line one\n    line two\n  b: >-\n    folded\n    text\n",
	"empty":               "",
	"comment only":        "# nothing\n",
	"null document":       "null\n",
	"no kind":             "apiVersion: v1\nmetadata: {name: a}\n",
	"kind not a string":   "apiVersion: v1\nkind: 5\n",
	"a list":              "- a\n- b\n",
	"apiVersion unparsed": "apiVersion: apps/v1/\nkind: Deployment\n",
	"a scalar":            "just text\n",
	"not YAML":            "apiVersion: v1\nkind: A\nspec: {a: [}\n",
	"tabs":                "apiVersion: v1\nkind: A\n\tspec: {}\n",
	"nested lists":        "apiVersion: v1\nkind: A\nspec: {a: [[1, [2, {b: [3]}]], x]}\n",
}

// TestDecodeDocumentIsTheJSONRoundTrip: the direct conversion gives every
// document exactly what YAMLToJSON then UnmarshalJSON give (the types of
// the values included), and the same error.
func TestDecodeDocumentIsTheJSONRoundTrip(t *testing.T) {
	docs := map[string][]byte{}
	for name, doc := range decodeCases {
		docs[name] = []byte(doc)
	}
	for _, depth := range [][2]int{{0, maxDirectDepth - 2}, {0, maxDirectDepth + 1}, {3000, 8000}} {
		// Nesting past what the direct conversion follows, and past what
		// the JSON decoder accepts (10,000: the round trip's error), in
		// block lists ("- - ...") then flow lists ("[[...]]"), which the
		// YAML parser counts apart.
		nested := strings.Repeat("- ", depth[0]) + strings.Repeat("[", depth[1]) + strings.Repeat("]", depth[1])
		docs[fmt.Sprintf("nested %d+%d deep", depth[0], depth[1])] = []byte("apiVersion: v1\nkind: A\nspec:\n" + nested + "\n")
	}
	maps.Copy(docs, expectedDocuments(t))
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) { sameAsJSONRoundTrip(t, doc) })
	}
}

// TestDecodeDocumentRefusesKeysThatAreOneAsJSON: a map whose keys differ
// in YAML but are one as JSON, with different values, is an error, not an
// object whose value for that key changes from one render to the next.
func TestDecodeDocumentRefusesKeysThatAreOneAsJSON(t *testing.T) {
	for name, tc := range map[string]struct{ doc, message string }{
		"integer and string": {"apiVersion: v1\nkind: A\nspec: {1: a, \"1\": b}\n",
			`at spec, integer 1 and string "1" are both "1", with different values`},
		"boolean and string": {"apiVersion: v1\nkind: A\nspec: {yes: a, \"true\": b}\n",
			`at spec, boolean true and string "true" are both "true"`},
		"float and integer, in a list": {"apiVersion: v1\nkind: A\nspec: {x: [{0: a, 0.0: b}]}\n",
			`at spec.x[0], float 0 and integer 0 are both "0"`},
		"bytes that are not UTF-8": {"apiVersion: v1\nkind: A\ndata: {!!binary /w==: a, !!binary /g==: b}\n",
			"at data, string \"\\xfe\" and string \"\\xff\" are both \"\ufffd\""},
		"the first of two, in order": {"apiVersion: v1\nkind: A\nspec: {2: a, \"2\": b, 1: c, \"1\": d}\nzz: {1: a, \"1\": b}\n",
			`at spec, integer 1 and string "1" are both "1"`},
		"at the top": {"apiVersion: v1\nkind: A\n1: a\n\"1\": b\n",
			`at the top level, integer 1 and string "1"`},
	} {
		t.Run(name, func(t *testing.T) {
			for range 20 { // the same error, whatever the map order
				_, err := decodeDocument([]byte(tc.doc))
				if !errors.Is(err, errSameKeys) || !strings.Contains(err.Error(), tc.message) {
					t.Fatalf("error %v, want one saying %s", err, tc.message)
				}
			}
		})
	}
	for _, doc := range []string{
		"apiVersion: v1\nkind: A\nspec: {1: a, 2: b, \"3\": c, 1.5: d}\n", // apart as JSON
		"apiVersion: v1\nkind: A\nspec: {1: a, \"1\": a}\n",               // one key, one value
	} {
		sameAsJSONRoundTrip(t, []byte(doc))
	}
}

// FuzzDecodeDocument: the same, for documents the fuzzer makes.
func FuzzDecodeDocument(f *testing.F) {
	for _, doc := range decodeCases {
		f.Add([]byte(doc))
	}
	f.Fuzz(sameAsJSONRoundTrip)
}

func sameAsJSONRoundTrip(t *testing.T, doc []byte) {
	t.Helper()
	want, wantErr := decodeDocumentViaJSON(doc)
	if again, _ := decodeDocumentViaJSON(doc); !sameObject(want, again) {
		// Keys that differ in YAML but not as strings ({1: a, "1": b}):
		// which value the round trip keeps depends on map order.
		t.Skip("the JSON round trip itself differs from run to run")
	}
	got, err := decodeDocument(doc)
	if errors.Is(err, errSameKeys) {
		t.Skip("keys that are one as JSON: refused (TestDecodeDocumentRefusesKeysThatAreOneAsJSON)")
	}
	if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
		t.Fatalf("error %v, the JSON round trip's %v", err, wantErr)
	}
	if !sameObject(got, want) {
		t.Errorf("object\n%#v\nthe JSON round trip's\n%#v", got, want)
	}
}

func sameObject(a, b *unstructured.Unstructured) bool {
	if a == nil || b == nil {
		return a == b
	}
	return reflect.DeepEqual(a.Object, b.Object)
}

// expectedDocuments are the documents of every sample kind's expected
// render (templates/*/tests/*/expected.yaml): what templates write.
func expectedDocuments(tb testing.TB) map[string][]byte {
	tb.Helper()
	files, err := filepath.Glob("../templates/*/tests/*/expected.yaml")
	if err != nil || len(files) == 0 {
		tb.Fatalf("no expected renders found: %v", err)
	}
	docs := map[string][]byte{}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			tb.Fatal(err)
		}
		reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
		for n := 1; ; n++ {
			doc, err := reader.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				tb.Fatalf("%s: %v", file, err)
			}
			docs[fmt.Sprintf("%s#%d", file, n)] = doc
		}
	}
	return docs
}

// BenchmarkDecodeDocument decodes the documents of every expected render,
// directly and through JSON (go test -bench DecodeDocument -benchmem ./render).
func BenchmarkDecodeDocument(b *testing.B) {
	docs := expectedDocuments(b)
	for name, decode := range map[string]func([]byte) (*unstructured.Unstructured, error){
		"direct": decodeDocument, "via JSON": decodeDocumentViaJSON,
	} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				for _, doc := range docs {
					if _, err := decode(doc); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
