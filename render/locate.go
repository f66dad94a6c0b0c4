package render

import (
	"bytes"
	"errors"
	"io/fs"
	"regexp"
	"strings"
)

// fieldPather is a validation error that names the fields it refused, as
// paths like .spec.template.spec.containers[0].image.
type fieldPather interface {
	FieldPaths() []string
}

// locate returns the line of template file that writes the first field err
// refuses, when that field's key is written on exactly one line of the
// file; 0 when it cannot tell (the key is computed, or written more than
// once, or the file is kustomize's output).
func (k *Kind) locate(file, kind string, err error) int {
	var fp fieldPather
	if !errors.As(err, &fp) || len(fp.FieldPaths()) == 0 {
		return 0
	}
	src, readErr := fs.ReadFile(k.def.Templates, file)
	if readErr != nil {
		return 0
	}
	return lineOfKey(src, kind, lastKey(fp.FieldPaths()[0]))
}

// lastKey is the last field name of path: .spec.ports[0].port is "port",
// .spec.ports[0] is "ports".
func lastKey(path string) string {
	path = strings.TrimRight(path, "]0123456789[")
	return path[strings.LastIndex(path, ".")+1:]
}

// lineOfKey is the 1-based line of src where key is written as a YAML key,
// when it is written on exactly one line: of the one document of src (a
// template may write several) whose kind is kind, when there is one.
func lineOfKey(src []byte, kind, key string) int {
	if key == "" {
		return 0
	}
	lines := bytes.Split(src, []byte("\n"))
	from, to := documentOf(lines, kind)
	re := regexp.MustCompile(`^\s*(- )?"?` + regexp.QuoteMeta(key) + `"?\s*:`)
	found := 0
	for i := from; i < to; i++ {
		if re.Match(lines[i]) {
			if found != 0 {
				return 0
			}
			found = i + 1
		}
	}
	return found
}

// documentOf is the range of lines of the one document (between --- lines)
// that says kind: kind, or every line when none or several do.
func documentOf(lines [][]byte, kind string) (from, to int) {
	kindLine := regexp.MustCompile(`^kind:\s*"?` + regexp.QuoteMeta(kind) + `"?\s*$`)
	start, matches := 0, 0
	for i := 0; i <= len(lines); i++ {
		if i == len(lines) || bytes.HasPrefix(lines[i], []byte("---")) {
			for j := start; j < i; j++ {
				if kindLine.Match(lines[j]) {
					from, to = start, i
					matches++
					break
				}
			}
			start = i + 1
		}
	}
	if matches != 1 {
		return 0, len(lines)
	}
	return from, to
}
