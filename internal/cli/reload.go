package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/stencil-operator/stencil/internal/operator/kinds"
	"github.com/stencil-operator/stencil/reconciler"
	"github.com/stencil-operator/stencil/render"
)

// templateFlags say where the operator reads the templates from, and
// whether it picks up their edits while it runs.
type templateFlags struct {
	dir    string
	reload bool
}

func (f *templateFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&f.dir, "templates", "", "Read the kinds' and decorators' folders from this folder (laid out as templates/) instead of the built-in ones.")
	fs.BoolVar(&f.reload, "reload-templates", false, "With --templates: watch the folder and, when a kind's folder changes, load it again, run its test cases and, if they pass, reconcile the kind's resources with it, without a restart (make run does this). A folder that fails keeps the last good templates. Decorators' folders and Go types need a restart.")
}

func (f templateFlags) check() error {
	if f.reload && f.dir == "" {
		return errors.New("--reload-templates needs --templates: the folder to watch")
	}
	return nil
}

// reloadQuiet is how long the folder stays quiet before a burst of
// writes (an editor's save is several) is taken as one change.
const reloadQuiet = 100 * time.Millisecond

// watchTemplates, with --reload-templates, has mgr watch the templates
// folder and replace a kind's templates in live when its folder changes.
func watchTemplates(mgr ctrl.Manager, f templateFlags, set kinds.Set, prepare func(kinds.Folder) kinds.Folder, live *reconciler.LiveKinds, defaults render.Validator) error {
	if !f.reload {
		return nil
	}
	return mgr.Add(&templateWatcher{dir: f.dir, set: set, prepare: prepare, live: live, defaults: defaults,
		log: mgr.GetLogger().WithName("templates"), failing: map[string]bool{}})
}

// templateWatcher reloads the kinds' folders as they are edited. It runs
// on the leader only (a reload queues the kind's resources, which only a
// running controller takes); when it starts it loads every kind's folder
// once, so that a standby that becomes the leader renders with the
// folders as they are then.
type templateWatcher struct {
	dir string
	set kinds.Set
	// prepare gives a loaded folder what the running ones have: the
	// render limits, the cluster's version.
	prepare func(kinds.Folder) kinds.Folder
	live    *reconciler.LiveKinds
	// defaults defaults the test cases' inputs (crdDefaults).
	defaults render.Validator
	log      logr.Logger
	// failing are the folders whose last edit was refused.
	failing map[string]bool
}

// Start watches the folder until ctx ends.
func (w *templateWatcher) Start(ctx context.Context) error {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching the templates: %w", err)
	}
	defer func() { _ = fw.Close() }()
	if err := watchTree(fw, w.dir); err != nil {
		return err
	}
	w.log.Info("Watching the templates: an edit of a kind's folder is picked up live; a change of Go types needs a restart", "dir", w.dir)
	for _, folder := range w.set.KindFolders() { // what changed before this process led
		w.reload(ctx, folder, nil)
	}
	changed := make(chan string, 64)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case err, ok := <-fw.Errors:
				if !ok {
					return
				}
				w.log.Error(err, "Watching the templates")
			case ev, ok := <-fw.Events:
				if !ok {
					return
				}
				if ev.Op.Has(fsnotify.Create) {
					if info, err := os.Stat(ev.Name); err == nil && info.IsDir() {
						_ = watchTree(fw, ev.Name) // a new folder: watch what it holds
					}
				}
				if ev.Op == fsnotify.Chmod {
					continue
				}
				if rel, err := filepath.Rel(w.dir, ev.Name); err == nil {
					select {
					case changed <- filepath.ToSlash(rel):
					case <-ctx.Done():
						return
					}
				}
			}
		}
	}()
	debounce(ctx, changed, reloadQuiet, func(b burst) { w.apply(ctx, b) })
	return nil
}

// watchTree watches dir and every folder under it (fsnotify watches one
// folder, not what is below it).
func watchTree(fw *fsnotify.Watcher, dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if err := fw.Add(p); err != nil {
				return fmt.Errorf("watching %s: %w", p, err)
			}
		}
		return nil
	})
}

// burst is what one burst of writes changed: by kind's (or decorator's)
// folder, the files, relative to the templates folder; and the Go files.
type burst struct {
	folders map[string][]string
	goFiles []string
}

// add records a change of the file rel (relative to the templates folder)
// and reports whether it matters: editors' swap and backup files, hidden
// files and the folder itself do not.
func (b *burst) add(rel string) bool {
	if rel == "" || rel == "." || strings.HasPrefix(rel, "../") {
		return false
	}
	for part := range strings.SplitSeq(rel, "/") {
		if strings.HasPrefix(part, ".") || strings.HasSuffix(part, "~") || part == "4913" { // vim's probe
			return false
		}
	}
	if path.Ext(rel) == ".go" {
		if !slices.Contains(b.goFiles, rel) {
			b.goFiles = append(b.goFiles, rel)
		}
		return true
	}
	folder, _, _ := strings.Cut(rel, "/")
	if b.folders == nil {
		b.folders = map[string][]string{}
	}
	if !slices.Contains(b.folders[folder], rel) {
		b.folders[folder] = append(b.folders[folder], rel)
	}
	return true
}

func (b burst) empty() bool { return len(b.folders) == 0 && len(b.goFiles) == 0 }

// debounce gathers the changed files from changed into bursts, and hands
// each to flush once no change came for quiet, until ctx ends.
func debounce(ctx context.Context, changed <-chan string, quiet time.Duration, flush func(burst)) {
	var b burst
	timer := time.NewTimer(quiet)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case rel := <-changed:
			if b.add(rel) {
				timer.Reset(quiet)
			}
		case <-timer.C:
			if !b.empty() {
				flush(b)
			}
			b = burst{}
		}
	}
}

// apply reloads each folder the burst changed, and says that Go files
// need a restart.
func (w *templateWatcher) apply(ctx context.Context, b burst) {
	if len(b.goFiles) > 0 {
		w.log.Info("Go files changed: a change of Go types or of the kinds' registration needs a restart of stencil (make run again)", "files", b.goFiles)
	}
	for _, folder := range slices.Sorted(maps.Keys(b.folders)) {
		w.reload(ctx, folder, b.folders[folder])
	}
}

// reload loads the folder again, runs its test cases and, if it loads and
// passes, has the kind's controller render with it. Else the controller
// keeps the last good templates, and the error says why (the file, the
// test case), until an edit fixes it.
func (w *templateWatcher) reload(ctx context.Context, folder string, files []string) {
	start := time.Now()
	where := filepath.Join(w.dir, folder)
	f, ok, err := w.set.KindFolder(w.dir, folder)
	if !ok {
		if slices.ContainsFunc(w.set.Decorators, func(d render.DecoratorDefinition) bool { return d.Name == folder }) {
			w.log.Info("A decorator's templates changed: decorators are not reloaded; restart stencil (make run again) to pick the change up", "folder", where, "files", files)
		}
		return
	}
	var replaced reconciler.Replaced
	if err == nil {
		f = w.prepare(f)
		err = kinds.CheckRenders([]kinds.Folder{f}, w.defaults)
	}
	if err == nil {
		replaced, err = w.live.Replace(ctx, f.Kind)
	}
	if errors.Is(err, reconciler.ErrNotRunning) {
		w.log.V(1).Info("Not reloading a kind that does not run", "folder", where)
		return
	}
	if err != nil && replaced.Templates != "" {
		w.log.Error(err, "Reloaded templates, but could not queue the kind's resources: they get them at their next reconcile", "folder", where)
		return
	}
	if err != nil {
		w.failing[folder] = true
		w.log.Error(err, "Keeping the last good templates: the edited folder does not load, cannot render one of its test cases, or needs a restart", "folder", where, "files", files)
		return
	}
	if w.failing[folder] {
		delete(w.failing, folder)
		w.log.Info("The templates load again", "folder", where)
	}
	if replaced.Unchanged {
		return
	}
	w.log.Info("Reloaded templates", "kind", f.Kind.GroupVersionKind().Kind, "folder", where, "files", files,
		"templates", replaced.Templates, "resources", replaced.Resources, "took", time.Since(start).Round(time.Millisecond))
}
