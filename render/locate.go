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
func (k *Kind) locate(file string, err error) int {
	var fp fieldPather
	if !errors.As(err, &fp) || len(fp.FieldPaths()) == 0 {
		return 0
	}
	src, readErr := fs.ReadFile(k.def.Templates, file)
	if readErr != nil {
		return 0
	}
	return lineOfKey(src, lastKey(fp.FieldPaths()[0]))
}

// lastKey is the last field name of path: .spec.ports[0].port is "port",
// .spec.ports[0] is "ports".
func lastKey(path string) string {
	path = strings.TrimRight(path, "]0123456789[")
	return path[strings.LastIndex(path, ".")+1:]
}

// lineOfKey is the 1-based line of src where key is written as a YAML key,
// when it is written on exactly one line.
func lineOfKey(src []byte, key string) int {
	if key == "" {
		return 0
	}
	re := regexp.MustCompile(`^\s*(- )?"?` + regexp.QuoteMeta(key) + `"?\s*:`)
	found := 0
	for i, line := range bytes.Split(src, []byte("\n")) {
		if re.Match(line) {
			if found != 0 {
				return 0
			}
			found = i + 1
		}
	}
	return found
}
