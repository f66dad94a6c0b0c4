package cli

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestTemplateFlagsCheck(t *testing.T) {
	if err := (templateFlags{reload: true}).check(); err == nil {
		t.Error("--reload-templates without --templates: want an error")
	}
	if err := (templateFlags{dir: "templates", reload: true}).check(); err != nil {
		t.Errorf("--templates templates --reload-templates: %v", err)
	}
}

// TestBurstAdd: the files a burst of writes changed map to the folders to
// reload, and the Go files to report; what does not matter is left out.
func TestBurstAdd(t *testing.T) {
	cases := map[string]struct {
		// changed are the files that changed, relative to the templates
		// folder, in the order their events came.
		changed []string
		// folders are the folders to reload, with their changed files.
		folders map[string][]string
		// goFiles are the Go files to report.
		goFiles []string
	}{
		"one template": {
			changed: []string{"guestbook/deployment.yaml"},
			folders: map[string][]string{"guestbook": {"guestbook/deployment.yaml"}},
		},
		"an editor's save: backup, vim's probe, swap file, the file twice": {
			changed: []string{"guestbook/deployment.yaml~", "guestbook/4913", "guestbook/deployment.yaml", "guestbook/.deployment.yaml.swp", "guestbook/deployment.yaml"},
			folders: map[string][]string{"guestbook": {"guestbook/deployment.yaml"}},
		},
		"a test case and a helper of two kinds": {
			changed: []string{"myweb/tests/basic/expected.yaml", "guestbook/_helpers.tpl", "myweb/service.yaml"},
			folders: map[string][]string{
				"guestbook": {"guestbook/_helpers.tpl"},
				"myweb":     {"myweb/tests/basic/expected.yaml", "myweb/service.yaml"},
			},
		},
		"a folder made or removed": {
			changed: []string{"newkind"},
			folders: map[string][]string{"newkind": {"newkind"}},
		},
		"Go files, anywhere: not a folder to reload": {
			changed: []string{"kinds.go", "guestbook/x.go", "guestbook/configmap.yaml"},
			folders: map[string][]string{"guestbook": {"guestbook/configmap.yaml"}},
			goFiles: []string{"kinds.go", "guestbook/x.go"},
		},
		"only what does not matter: the folder itself, hidden files, outside": {
			changed: []string{".", "", ".git/index", "guestbook/.#deployment.yaml", "../elsewhere.yaml"},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var b burst
			for _, rel := range c.changed {
				b.add(rel)
			}
			if diff := cmp.Diff(c.folders, b.folders); diff != "" {
				t.Errorf("folders (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.goFiles, b.goFiles); diff != "" {
				t.Errorf("Go files (-want +got):\n%s", diff)
			}
			if b.empty() != (c.folders == nil && c.goFiles == nil) {
				t.Errorf("empty() = %v", b.empty())
			}
		})
	}
}

// TestDebounce: the changes that come before the folder is quiet are one
// burst, flushed once; the next change starts a new burst.
func TestDebounce(t *testing.T) {
	changed := make(chan string, 8)
	for _, rel := range []string{"guestbook/deployment.yaml", "guestbook/deployment.yaml~", "myweb/service.yaml", "guestbook/deployment.yaml"} {
		changed <- rel // all queued before debounce starts: one burst
	}
	flushed := make(chan burst)
	go debounce(t.Context(), changed, reloadQuiet, func(b burst) { flushed <- b })
	next := func() burst {
		t.Helper()
		select {
		case b := <-flushed:
			return b
		case <-time.After(10 * time.Second):
			t.Fatal("no burst flushed")
			return burst{}
		}
	}
	want := map[string][]string{"guestbook": {"guestbook/deployment.yaml"}, "myweb": {"myweb/service.yaml"}}
	if diff := cmp.Diff(want, next().folders); diff != "" {
		t.Errorf("first burst (-want +got):\n%s", diff)
	}
	changed <- "myweb/configmap.yaml"
	if diff := cmp.Diff(map[string][]string{"myweb": {"myweb/configmap.yaml"}}, next().folders); diff != "" {
		t.Errorf("second burst (-want +got):\n%s", diff)
	}
}
