package scaffold

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestChangedPluralLeavesNothingStale scaffolds a kind in a copy of the
// repository, changes its plural (the resource marker's path), and runs
// `make manifests` again: the CRD file of the old plural and its
// kustomization entry are gone, and the kustomization lists exactly the
// CRD files there are.
func TestChangedPluralLeavesNothingStale(t *testing.T) {
	root := copyRepository(t)
	k, err := newKind("pluraltest.example.com", "v1alpha1", "Policy")
	if err != nil {
		t.Fatal(err)
	}
	k.Module = "github.com/stencil-operator/stencil"
	if err := scaffold(root, k); err != nil {
		t.Fatal(err)
	}
	run(t, root, "make", "generate", "manifests")
	const before, after = "config/crd/bases/pluraltest.example.com_policies.yaml", "config/crd/bases/pluraltest.example.com_policys.yaml"
	if _, err := os.Stat(filepath.Join(root, before)); err != nil {
		t.Fatalf("the scaffolded kind's CRD: %v", err)
	}
	types := filepath.Join(root, "api", k.Package, k.Version, k.Lower+"_types.go")
	src, err := os.ReadFile(types)
	if err != nil {
		t.Fatal(err)
	}
	marker := "+kubebuilder:resource:categories={stencil}"
	if !strings.Contains(string(src), marker) {
		t.Fatalf("%s has no %s to change", types, marker)
	}
	src = []byte(strings.Replace(string(src), marker, "+kubebuilder:resource:path=policys,categories={stencil}", 1))
	if err := os.WriteFile(types, src, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, root, "make", "manifests")

	if _, err := os.Stat(filepath.Join(root, before)); err == nil {
		t.Errorf("%s is left behind", before)
	}
	if _, err := os.Stat(filepath.Join(root, after)); err != nil {
		t.Errorf("the CRD of the new plural: %v", err)
	}
	files, err := filepath.Glob(filepath.Join(root, "config/crd/bases/*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range files {
		want = append(want, "- bases/"+filepath.Base(f))
	}
	kustomization, err := os.ReadFile(filepath.Join(root, "config/crd/kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for line := range strings.SplitSeq(string(kustomization), "\n") {
		if strings.HasPrefix(line, "- ") {
			got = append(got, line)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("config/crd/kustomization.yaml lists\n%s\nwant the CRD files\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
