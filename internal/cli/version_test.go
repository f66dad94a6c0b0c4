package cli

import (
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestVersion: stencil version prints the version, the commit and Go's
// version, and stencil_build_info carries the same.
func TestVersion(t *testing.T) {
	out, code, err := execute(t, "version")
	if code != 0 || !strings.HasPrefix(out, "stencil ") || !strings.Contains(out, runtime.Version()) {
		t.Fatalf("stencil version: exit %d (%v): %q", code, err, out)
	}
	b := thisBuild()
	if got := testutil.ToFloat64(buildInfo.WithLabelValues(b.Version, b.Revision, b.Go)); got != 1 {
		t.Errorf("stencil_build_info{%s} = %v, want 1", b, got)
	}
	if strings.TrimSpace(out) != b.String() {
		t.Errorf("stencil version printed %q, want %q", out, b)
	}
}
