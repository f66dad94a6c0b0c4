package engine

import (
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

// TestRecordsAreShared: baselines of objects of one shape keep one copy of
// their record, with its content intact.
func TestRecordsAreShared(t *testing.T) {
	const rec = `{"f:data":{"f:message":{}},"f:metadata":{"f:labels":{"f:app":{}}}}`
	a, ha := interned([]string{strings.Clone(rec)})
	b, hb := interned([]string{strings.Clone(rec)})
	if unsafe.StringData(a[0]) != unsafe.StringData(b[0]) {
		t.Error("two baselines of one record keep two copies")
	}
	if a[0] != rec {
		t.Errorf("interned record = %s, want %s", a[0], rec)
	}
	other, ho := interned([]string{`{"f:data":{}}`})
	if unsafe.StringData(other[0]) == unsafe.StringData(a[0]) {
		t.Error("two records of different content share memory")
	}
	runtime.KeepAlive(ha)
	runtime.KeepAlive(hb)
	runtime.KeepAlive(ho)
}
