package render

import (
	"fmt"
	"io/fs"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// written is what a kind's template files write themselves, read once when
// the kind loads: a rendered object may carry only what its file could have
// written, so a value of the resource cannot add one of stencil's behaviour
// annotations or change an object's kind (see [written.check]).
type written struct {
	// behaviour are, by template file, the annotations of stencil's that
	// change how it applies an object (stencil.dev/prune, ssa, force,
	// hand-over) that the file or a helper writes.
	behaviour map[string][]string
	// kinds are, by template file, the kinds of object it writes, when
	// its text says (see [kindsWritten]).
	kinds map[string][]string
	// namespaces are those its templates write literally (see
	// [Kind.WritesNamespace]).
	namespaces map[string]bool
}

// behaviourAnnotations are stencil's annotations that change how it
// applies, keeps or hands over an object: a template may write them, a
// value may not.
var behaviourAnnotations = []string{v1alpha1.AnnotationPrune, v1alpha1.AnnotationSSA, v1alpha1.AnnotationForce, v1alpha1.AnnotationHandOver}

// templateTexts are the texts of a kind's template files, by file, and
// of its helpers (*.tpl files and _*.yaml ones) together.
func templateTexts(fsys fs.FS, entries []fs.DirEntry) (map[string]string, string, error) {
	texts := map[string]string{}
	var helpers strings.Builder
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || path.Ext(name) != ".yaml" && path.Ext(name) != ".tpl" || name == declarationFile {
			continue
		}
		src, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, "", fmt.Errorf("reading %s: %w", name, err)
		}
		if path.Ext(name) == ".tpl" || strings.HasPrefix(name, "_") {
			helpers.Write(src)
			helpers.WriteByte('\n')
			continue
		}
		texts[name] = string(src)
	}
	return texts, helpers.String(), nil
}

// readWritten reads what the kind's template files write themselves: the
// behaviour annotations, the kinds and the namespaces (see [written.check]).
func readWritten(fsys fs.FS, entries []fs.DirEntry) (written, error) {
	texts, helpers, err := templateTexts(fsys, entries)
	if err != nil {
		return written{}, err
	}
	w := written{behaviour: behaviourWritten(texts, helpers), kinds: kindsWritten(texts, helpers), namespaces: map[string]bool{}}
	for _, text := range append(slices.Collect(maps.Values(texts)), helpers) {
		for _, m := range namespaceLine.FindAllStringSubmatch(text, -1) {
			w.namespaces[m[1]] = true
		}
	}
	return w, nil
}

// namespaceLine is a literal namespace a template writes.
var namespaceLine = regexp.MustCompile(`(?m)^\s*namespace:\s*["']?([a-z0-9]([-a-z0-9]*[a-z0-9])?)["']?\s*$`)

// WritesNamespace reports whether a template of the kind writes the
// namespace ns literally (namespace: kube-system), not from a value.
func (k *Kind) WritesNamespace(ns string) bool { return k.written.namespaces[ns] }

// behaviourWritten are, by template file, the behaviourAnnotations that
// the file's text or a helper's holds: a rendered object may carry only
// those its file could have written.
func behaviourWritten(texts map[string]string, helpers string) map[string][]string {
	out := map[string][]string{}
	for file, text := range texts {
		for _, a := range behaviourAnnotations {
			if strings.Contains(text, a) || strings.Contains(helpers, a) {
				out[file] = append(out[file], a)
			}
		}
	}
	return out
}

// topLevelKind matches a line of a template that writes a document's kind.
var topLevelKind = regexp.MustCompile(`(?m)^kind:[ \t]*([^\r\n]*?)\r?$`)

// kindsWritten are, by template file, the kinds its documents may have:
// those its text and the helpers' write at the top level of a document
// (kind: X, X literal). A file is missing (any kind of the kind's owned
// types) when it or a helper writes a kind that is not literal or a list
// (whose items' kinds are indented), or when the file writes no kind
// itself: its documents come from a helper or a value it hands to tpl.
func kindsWritten(texts map[string]string, helpers string) map[string][]string {
	literal := func(text string) ([]string, bool) {
		var kinds []string
		for _, m := range topLevelKind.FindAllStringSubmatch(text, -1) {
			kind, _, _ := strings.Cut(m[1], "#")
			kind = strings.Trim(strings.TrimSpace(kind), `"'`)
			if kind == "" || strings.Contains(kind, "{{") || strings.HasSuffix(kind, "List") {
				return nil, false
			}
			kinds = append(kinds, kind)
		}
		return kinds, true
	}
	fromHelpers, ok := literal(helpers)
	if !ok {
		return map[string][]string{}
	}
	out := map[string][]string{}
	for file, text := range texts {
		if kinds, ok := literal(text); ok && len(kinds) > 0 {
			kinds = append(kinds, fromHelpers...)
			slices.Sort(kinds)
			out[file] = slices.Compact(kinds)
		}
	}
	return out
}

// check refuses a rendered object that a value of the resource
// shaped, not the template file it came from: one that carries one of
// stencil's behaviour annotations that the file's templates do not write,
// or whose kind the file does not write. kustomization.yaml's objects may
// carry any annotation that a template of the kind writes, and be of any
// kind.
func (w written) check(o *unstructured.Unstructured) error {
	ann := o.GetAnnotations()
	file := ann[sourceAnnotation]
	for _, a := range behaviourAnnotations {
		if _, ok := ann[a]; !ok || slices.Contains(w.behaviour[file], a) {
			continue
		}
		if file == kustomizationFile && slices.ContainsFunc(slices.Collect(maps.Values(w.behaviour)), func(as []string) bool { return slices.Contains(as, a) }) {
			continue
		}
		return &Error{File: file, Err: fmt.Errorf("%s %q: annotation %s: no template of the kind writes it, so a value of the resource did; values cannot change how stencil applies an object", o.GetKind(), o.GetName(), a)}
	}
	if kinds, ok := w.kinds[file]; ok && !slices.Contains(kinds, o.GetKind()) {
		return &Error{File: file, Err: fmt.Errorf("%s %q: %s writes only %s, so a value of the resource changed the object's kind; values cannot", o.GetKind(), o.GetName(), file, strings.Join(kinds, ", "))}
	}
	return nil
}
