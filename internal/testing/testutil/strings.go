package testutil

import (
	"slices"
	"unsafe"
)

// CopiedTwice are the keys of a that b holds too, as "key=value", where
// the two maps hold the key's or the value's bytes in two places: a test
// of a cache that shares its strings (engine.InternMetadata) expects none.
func CopiedTwice(a, b map[string]string) []string {
	var copied []string
	for k, v := range a {
		for k2, v2 := range b {
			if k == k2 && (unsafe.StringData(k) != unsafe.StringData(k2) || unsafe.StringData(v) != unsafe.StringData(v2)) {
				copied = append(copied, k+"="+v)
			}
		}
	}
	slices.Sort(copied)
	return copied
}
