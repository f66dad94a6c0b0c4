package kinds_test

import (
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/stencil-operator/stencil/internal/kinds"
	"github.com/stencil-operator/stencil/internal/testkind"
	"github.com/stencil-operator/stencil/render"
)

// TestCheckRenders: the start-up check passes on the shipped kinds and
// refuses a folder whose templates fail one of its own cases, naming it.
func TestCheckRenders(t *testing.T) {
	shipped, err := kinds.Folders("")
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
// types in AddToScheme fails at start with what to add, not later with
// controller-runtime's "no kind is registered".
func TestAKindMissingFromAddToScheme(t *testing.T) {
	all := kinds.Samples()
	missing := kinds.NewSet("widgets", all.Kinds, nil, nil)
	err := missing.AddTo(runtime.NewScheme())
	if err == nil || !strings.Contains(err.Error(), "are not in the project's AddToScheme") {
		t.Fatalf("AddTo without the kinds' schemes: %v, want an error naming what to add", err)
	}
	if err := all.AddTo(runtime.NewScheme()); err != nil {
		t.Errorf("AddTo of the samples: %v", err)
	}
}
