package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/internal/dev/localcluster"
)

// TestHelmChartRendersWhatStencilRenders: the Helm operator's chart
// (hack/bench/peers/helm/myweb), given a MyWeb's spec as values, renders
// the objects stencil's templates render for that MyWeb, but for what
// stencil adds of its own (labels, annotations, ownerReference).
func TestHelmChartRendersWhatStencilRenders(t *testing.T) {
	bin, err := localcluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	kind, err := myWebKind()
	if err != nil {
		t.Fatal(err)
	}
	for i, web := range myWebs(2, 1) {
		if i == 1 {
			web.Spec.PageContentHtml = "" // the empty page
		}
		web.UID = types.UID("00000000-0000-4000-8000-000000000001")
		objs, err := kind.Render(web)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]map[string]any{}
		for _, o := range objs {
			stripStencil(o)
			want[o.GetKind()+"/"+o.GetName()] = plain(t, o.Object)
		}
		values, err := yaml.Marshal(web.Spec)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(file, values, 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(filepath.Join(bin, "helm"), "template", web.Name, "peers/helm/myweb", "--values", file).Output()
		if err != nil {
			t.Fatalf("helm template: %v", err)
		}
		got := map[string]map[string]any{}
		for doc := range strings.SplitSeq(string(out), "\n---\n") {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(bytes.TrimSpace([]byte(doc)), &u.Object); err != nil {
				t.Fatal(err)
			}
			if len(u.Object) > 0 {
				got[u.GetKind()+"/"+u.GetName()] = plain(t, u.Object)
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: the chart renders other objects than stencil (-stencil +chart):\n%s", web.Name, diff)
		}
	}
}

// stripStencil removes from o what stencil adds: its labels and
// annotations, the owner reference and the namespace (helm template sets
// none).
func stripStencil(o *unstructured.Unstructured) {
	labels := o.GetLabels()
	for k := range labels {
		if k == "app.kubernetes.io/managed-by" || strings.HasPrefix(k, "stencil.dev/") {
			delete(labels, k)
		}
	}
	o.SetLabels(labels)
	ann := o.GetAnnotations()
	for k := range ann {
		if strings.Contains(k, "stencil.dev/") {
			delete(ann, k)
		}
	}
	if len(ann) == 0 {
		ann = nil
	}
	o.SetAnnotations(ann)
	o.SetOwnerReferences(nil)
	o.SetNamespace("")
}

// plain is o through JSON, so that numbers compare whatever their Go type.
func plain(t *testing.T, o map[string]any) map[string]any {
	t.Helper()
	js, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(js, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
