package kinds_test

import (
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/stencil-operator/stencil/internal/operator/kinds"
	"github.com/stencil-operator/stencil/internal/testing/samples"
	"github.com/stencil-operator/stencil/internal/testing/testkind"
	"github.com/stencil-operator/stencil/render"
)

// TestCheckRenders: the start-up check passes on the shipped kinds and
// refuses a folder whose templates fail one of its own cases, naming it.
func TestCheckRenders(t *testing.T) {
	shipped, err := samples.Folders("")
	if err != nil {
		t.Fatal(err)
	}
	if err := kinds.CheckRenders(shipped, nil); err != nil {
		t.Fatalf("the shipped kinds: %v", err)
	}
	def := testkind.Widget()
	failing, err := fs.ReadFile(def.Templates, "tests/fail/input.yaml")
	if err != nil {
		t.Fatal(err)
	}
	folder := fstest.MapFS{"tests/broken/input.yaml": {Data: failing}}
	entries, err := fs.ReadDir(def.Templates, ".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			data, _ := fs.ReadFile(def.Templates, e.Name())
			folder[e.Name()] = &fstest.MapFile{Data: data}
		}
	}
	def.Templates = folder
	k, err := render.Load(def)
	if err != nil {
		t.Fatal(err)
	}
	err = kinds.CheckRenders([]kinds.Folder{{Name: "widget", FS: folder, Kind: k}}, nil)
	if err == nil || !strings.Contains(err.Error(), "templates/widget cannot render its test case broken") || !strings.Contains(err.Error(), "spec.fail is set") {
		t.Fatalf("error %v, want one naming the folder, the case and the failure", err)
	}
}

// TestAKindMissingFromAddToScheme: a kind registered without its Go
// types (no AddToScheme, or one of another API package) fails at start
// with what to set, not later with controller-runtime's "no kind is
// registered"; kinds of one package may each name its AddToScheme.
func TestAKindMissingFromAddToScheme(t *testing.T) {
	all := samples.Set()
	memcached, myweb := all.Kinds[0], all.Kinds[1]
	noScheme, otherScheme, twice := memcached, memcached, myweb
	noScheme.AddToScheme = nil
	otherScheme.AddToScheme = myweb.AddToScheme
	for _, tt := range []struct {
		name  string
		kinds []render.Definition
		want  string // "": no error
	}{
		{"the samples", all.Kinds, ""},
		{"no AddToScheme", []render.Definition{noScheme}, "kind Memcached has no AddToScheme: set it to the AddToScheme of its API package"},
		{"another package's", []render.Definition{otherScheme}, "kind Memcached: its AddToScheme does not add its Go types"},
		{"one package's twice", []render.Definition{myweb, twice}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := kinds.NewSet("widgets", tt.kinds, nil).AddTo(runtime.NewScheme())
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("AddTo: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("AddTo: %v, want an error with %q", err, tt.want)
			}
		})
	}
}
