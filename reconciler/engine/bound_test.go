package engine

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCut(t *testing.T) {
	tests := []struct {
		name string
		in   string
		n    int
		want string
	}{
		{"short enough", "hello", 5, "hello"},
		{"ascii", strings.Repeat("a", 30), 20, strings.Repeat("a", 10) + cutMark},
		// "é" is two bytes: a cut at byte 11 would split the sixth one.
		{"never splits a character", strings.Repeat("é", 20), 21, strings.Repeat("é", 5) + cutMark},
		{"four-byte characters", strings.Repeat("😀", 10), 20, strings.Repeat("😀", 2) + cutMark},
		{"bound smaller than the mark", "abcdefghijklmnop", 3, cutMark},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Cut(tt.in, tt.n)
			if got != tt.want {
				t.Errorf("cut(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
			}
			if !utf8.ValidString(got) {
				t.Errorf("cut(%q, %d) = %q is not valid UTF-8", tt.in, tt.n, got)
			}
			if len(tt.in) > tt.n && len(got) > max(tt.n, len(cutMark)) {
				t.Errorf("cut(…, %d) is %d bytes", tt.n, len(got))
			}
		})
	}
}
