package cli

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stencil-operator/stencil/internal/scaffold"
	"github.com/stencil-operator/stencil/internal/testutil"
)

// TestImportVerifyWritesNothingOnFailure: import chart --verify checks
// before it writes: without helm it says where helm comes from, and when
// helm template renders otherwise it fails; either way the project is as
// it was, so that the import can be run again once fixed.
func TestImportVerifyWritesNothingOnFailure(t *testing.T) {
	chart, err := filepath.Abs("../chartimport/testdata/charts/shop")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := scaffold.Init(root, scaffold.Options{Module: "example.com/shops", StencilVersion: "v0.1.0"}); err != nil {
		t.Fatal(err)
	}
	// A helm whose template renders one ConfigMap, whatever it is given.
	other := filepath.Join(t.TempDir(), "helm")
	script := "#!/bin/sh\nprintf 'apiVersion: v1\\nkind: ConfigMap\\nmetadata: {name: other}\\n'\n"
	if err := os.WriteFile(other, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(root)
	before := testutil.Files(t, root)
	for _, tt := range []struct{ name, helm, want string }{
		{"no helm", filepath.Join(root, "bin", "helm"), "there is no helm at"},
		{"helm renders otherwise", other, "do not render as helm template does (nothing was written)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := execute(t, "import", "chart", chart, "--group", "shops.example.com", "--verify", "--helm", tt.helm)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("import chart --verify: %v, want an error with %q\n%s", err, tt.want, out)
			}
			if after := testutil.Files(t, root); !maps.Equal(before, after) {
				t.Errorf("the failed import changed the project")
			}
		})
	}
}
