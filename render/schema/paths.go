package schema

import (
	"fmt"
	"strconv"
	"strings"
)

// indexPath follows a structured-merge-diff path through obj, such as
// .spec.template.spec.containers[name="web"].image, and returns it with list
// indexes instead of the items' keys, .spec.template.spec.containers[0].image,
// the form the API server and the other problems use; with the map that
// holds its last field, and that field's name (nil and "" when it ends at a
// list item). ok is false when the path does not lead through obj.
func indexPath(obj map[string]any, path string) (indexed string, parent map[string]any, field string, ok bool) {
	var out strings.Builder
	var cur any = obj
	for path != "" {
		switch path[0] {
		case '.':
			end := strings.IndexAny(path[1:], ".[") + 1
			if end == 0 {
				end = len(path)
			}
			m, isMap := cur.(map[string]any)
			if !isMap {
				return "", nil, "", false
			}
			parent, field, cur = m, path[1:end], m[path[1:end]]
			out.WriteString(path[:end])
			path = path[end:]
		case '[':
			end := closingBracket(path)
			list, isList := cur.([]any)
			if end < 0 || !isList {
				return "", nil, "", false
			}
			i := itemOf(list, path[1:end])
			if i < 0 {
				return "", nil, "", false
			}
			parent, field, cur = nil, "", list[i]
			fmt.Fprintf(&out, "[%d]", i)
			path = path[end+1:]
		default:
			return "", nil, "", false
		}
	}
	return out.String(), parent, field, true
}

// closingBracket is the index of the ] that closes path's leading [,
// skipping quoted strings; -1 when none does.
func closingBracket(path string) int {
	quoted := false
	for i := 1; i < len(path); i++ {
		switch {
		case quoted && path[i] == '\\':
			i++
		case path[i] == '"':
			quoted = !quoted
		case !quoted && path[i] == ']':
			return i
		}
	}
	return -1
}

// itemOf is the index of the item of list a path element selects: an
// index (3), a set's value (="a") or an associative list's keys
// (name="web",port=80); -1 when none matches.
func itemOf(list []any, sel string) int {
	if i, err := strconv.Atoi(sel); err == nil {
		if i >= 0 && i < len(list) {
			return i
		}
		return -1
	}
	if value, isSet := strings.CutPrefix(sel, "="); isSet {
		for i, item := range list {
			if scalarString(item) == value {
				return i
			}
		}
		return -1
	}
	keys := splitKeys(sel)
	for i, item := range list {
		m, isMap := item.(map[string]any)
		if isMap && matchesKeys(m, keys) {
			return i
		}
	}
	return -1
}

// matchesKeys reports whether item has the keys' values; a key item lacks
// matches (structured-merge-diff keys it by the key field's default).
func matchesKeys(item map[string]any, keys map[string]string) bool {
	for k, want := range keys {
		if v, has := item[k]; has && scalarString(v) != want {
			return false
		}
	}
	return true
}

// splitKeys parses name="web",port=80 into its keys' values as written.
func splitKeys(sel string) map[string]string {
	keys := map[string]string{}
	quoted, start := false, 0
	for i := 0; i <= len(sel); i++ {
		switch {
		case i < len(sel) && quoted && sel[i] == '\\':
			i++
		case i < len(sel) && sel[i] == '"':
			quoted = !quoted
		case i == len(sel) || !quoted && sel[i] == ',':
			if name, value, found := strings.Cut(sel[start:i], "="); found {
				keys[name] = value
			}
			start = i + 1
		}
	}
	return keys
}

// scalarString writes a scalar as structured-merge-diff writes it in a
// path (value.ToString).
func scalarString(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(x)
	}
	return fmt.Sprintf("%v", v)
}
