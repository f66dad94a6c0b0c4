package kinds

import (
	"strings"

	"github.com/stencil-operator/stencil/render"
)

// KindFolder parses the folder name under dir (laid out as templates/)
// when it is a registered kind's, for the operator to reload while it runs
// (--reload-templates); ok is false when no registered kind has that
// folder (a decorator's, or another).
func (s Set) KindFolder(dir, name string) (f Folder, ok bool, err error) {
	for _, def := range s.Kinds {
		if kindFolder(def) == name {
			f, err := loadKind(def, dir)
			return f, true, err
		}
	}
	return Folder{}, false, nil
}

// KindFolders are the names of the registered kinds' folders.
func (s Set) KindFolders() []string {
	var names []string
	for _, def := range s.Kinds {
		names = append(names, kindFolder(def))
	}
	return names
}

// kindFolder is the name of a kind's folder under templates/.
func kindFolder(def render.Definition) string { return strings.ToLower(def.GroupVersionKind.Kind) }
