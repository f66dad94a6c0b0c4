package engine

import "unicode/utf8"

// cutMark ends a string that cut shortened.
const cutMark = " ... (cut)"

// Cut returns s when it holds at most n bytes; otherwise its longest prefix
// that ends on a UTF-8 character boundary and, with cutMark after it, holds
// at most n bytes. Every string stencil writes to status goes through it.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	end := max(n-len(cutMark), 0)
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + cutMark
}
