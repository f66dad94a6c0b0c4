package chart

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/stencil-operator/stencil/internal/dev/localcluster"
)

// TestChartIsUpToDate: dist/chart is what `stencil manifests` makes of config/default
// now (run `make manifests` after changing config/).
func TestChartIsUpToDate(t *testing.T) {
	want, err := chart("../../../config/default", "stencil", sampleDecorators())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]byte{}
	err = filepath.WalkDir("../../../dist/chart", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		rel, _ := filepath.Rel("../../../dist/chart", path)
		got[filepath.ToSlash(rel)] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range want {
		if !bytes.Equal(got[name], data) {
			t.Errorf("dist/chart/%s is out of date; run make manifests", name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("dist/chart/%s is not made from config/default any more; run make manifests", name)
		}
	}
}

// TestDecoratorsAreOptIn: the chart and config/default run no decorator;
// the seed-004 sample (config/samples/replicaset-podcount), as a
// kustomization and as Helm values, enables replicaset-podcount for the
// namespaces labelled stencil.dev/podcount=on.
func TestDecoratorsAreOptIn(t *testing.T) {
	want := []string{"--decorators=replicaset-podcount", "--decorator-namespace-selector=replicaset-podcount=stencil.dev/podcount=on"}
	args := func(manifests string) []string {
		t.Helper()
		var out []string
		for line := range strings.SplitSeq(manifests, "\n") {
			if arg := strings.Trim(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "- ")), `"`); strings.HasPrefix(arg, "--") && strings.Contains(arg, "decorator") {
				out = append(out, arg)
			}
		}
		return out
	}
	kustomize := func(dir string) string {
		t.Helper()
		res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
		if err != nil {
			t.Fatal(err)
		}
		data, err := res.AsYaml()
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	if got := args(kustomize("../../../config/default")); len(got) > 0 {
		t.Errorf("config/default runs decorators: %v", got)
	}
	if got := args(kustomize("../../../config/samples/replicaset-podcount")); !slices.Equal(got, want) {
		t.Errorf("the kustomization's decorator flags %v, want %v", got, want)
	}

	bin, err := localcluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(bin, "helm")); err != nil {
		t.Skipf("no bin/helm (make tools): %v", err)
	}
	helm := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(filepath.Join(bin, "helm"), append([]string{"template", "stencil", "../../../dist/chart", "--set", "image=stencil:test"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("helm template %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if got := args(helm()); len(got) > 0 {
		t.Errorf("the chart's defaults run decorators: %v", got)
	}
	if got := args(helm("-f", "../../../config/samples/replicaset-podcount/values.yaml")); !slices.Equal(got, want) {
		t.Errorf("the chart with the sample's values: decorator flags %v, want %v", got, want)
	}
	// The webhook's NetworkPolicy is opt-in too, and each except goes with
	// the cidr of its family.
	if strings.Contains(helm(), "kind: NetworkPolicy") {
		t.Error("the chart's defaults install the webhook's NetworkPolicy")
	}
	policy := helm("--set", "webhookNetworkPolicy.enabled=true", "--set", "webhookNetworkPolicy.except={10.244.0.0/16,fd00::/8}")
	for _, want := range []string{"kind: NetworkPolicy", "cidr: \"0.0.0.0/0\"\n        except: [\"10.244.0.0/16\"]", "cidr: \"::/0\"\n        except: [\"fd00::/8\"]"} {
		if !strings.Contains(policy, want) {
			t.Errorf("the chart with webhookNetworkPolicy enabled holds no %q", want)
		}
	}
}

// sampleDecorators names this repository's decorators: the folders of
// templates/ with a _decorator.yaml (package templates registers them
// through pkg/stencil, which imports this package).
func sampleDecorators() []string {
	found, err := filepath.Glob("../../../templates/*/_decorator.yaml")
	if err != nil {
		panic(err)
	}
	var names []string
	for _, f := range found {
		names = append(names, filepath.Base(filepath.Dir(f)))
	}
	return names
}
