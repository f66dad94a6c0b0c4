package docs_test

import (
	"context"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	stacksv1alpha1 "github.com/stencil-operator/stencil/api/stacks/v1alpha1"
	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/internal/testing/samples"
	"github.com/stencil-operator/stencil/internal/testing/testutil"
	"github.com/stencil-operator/stencil/internal/testing/testutil/testop"
	"github.com/stencil-operator/stencil/render"
	"github.com/stencil-operator/stencil/templates"
)

func appStack(t *testing.T, folder fs.FS) (*render.Kind, error) {
	t.Helper()
	return render.Load(render.Definition{
		GroupVersionKind: stacksv1alpha1.GroupVersion.WithKind("AppStack"),
		New:              func() v1alpha1.Object { return &stacksv1alpha1.AppStack{} },
		Templates:        folder,
	})
}

// TestAddGraph follows docs/add-graph.md: the templates it shows are the
// shipped ones, its render output and its cycle error are what stencil
// prints, and the sample it applies becomes Ready on a local control plane
// with kwok pods (the database's pod ready, the migration Job's pod
// complete).
func TestAddGraph(t *testing.T) {
	guide, err := os.ReadFile("add-graph.md")
	if err != nil {
		t.Fatal(err)
	}
	folder := templates.Kind("appstack")

	// Every YAML block but kro's is (part of) a shipped template.
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(guide), -1)
	shown := 0
	for _, b := range blocks {
		if strings.Contains(b[1], "kro.run") {
			continue
		}
		shown++
		found := false
		_ = fs.WalkDir(folder, ".", func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.Contains(path, "/") {
				return err
			}
			data, _ := fs.ReadFile(folder, path)
			found = found || strings.Contains(string(data), b[1])
			return nil
		})
		if !found {
			t.Errorf("the guide shows a template that templates/appstack/ does not hold:\n%s", b[1])
		}
	}
	if shown < 3 {
		t.Fatalf("the guide shows %d templates; want _kind.yaml, password.yaml and app.yaml", shown)
	}

	// The render output it prints.
	k, err := appStack(t, folder)
	if err != nil {
		t.Fatal(err)
	}
	sample := &stacksv1alpha1.AppStack{}
	data, err := os.ReadFile("../config/samples/appstack.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, sample); err != nil {
		t.Fatal(err)
	}
	sample.Namespace = "default"
	plan, err := k.RenderGraph(sample, render.GraphInput{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range plan.Waiting {
		if line := "AppStack shop: not rendered: " + w.String(); !strings.Contains(string(guide), line+"\n") {
			t.Errorf("stencil render prints %q, which the guide does not show", line)
		}
	}

	// The cycle error it quotes.
	cyclic := fstest.MapFS{}
	_ = fs.WalkDir(folder, ".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			data, _ := fs.ReadFile(folder, path)
			cyclic[path] = &fstest.MapFile{Data: data}
		}
		return err
	})
	decl := string(cyclic["_kind.yaml"].Data)
	cyclic["_kind.yaml"].Data = []byte(strings.Replace(decl, "after: [database]", "after: [database, app]", 1))
	_, err = appStack(t, cyclic)
	if err == nil || !strings.Contains(string(guide), "`"+err.Error()+"`") {
		t.Errorf("a cycle fails with %v, which the guide does not quote", err)
	}

	// Run it: the sample becomes Ready.
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, samples.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	k8s, err := client.New(cluster.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	crd, err := os.ReadFile("../config/crd/bases/stacks.stencil.dev_appstacks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := testutil.InstallCRDs(t.Context(), k8s, fstest.MapFS{"appstack.yaml": {Data: crd}}); err != nil {
		t.Fatal(err)
	}
	// The operator outlives the test's context: it removes the AppStack's
	// finalizer when the test deletes it.
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	if err := testop.StartOperator(ctx, cluster.Config, scheme, []*render.Kind{k}, nil); err != nil {
		t.Fatal(err)
	}
	kubectl(t, "apply", "-n", "default", "-f", "../config/samples/appstack.yaml")
	testutil.Eventually(t, 2*time.Minute, "the AppStack Ready", func() error {
		live := &stacksv1alpha1.AppStack{}
		if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "shop"}, live); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(live.Status.Conditions, v1alpha1.ConditionReady) {
			return &notReady{live.Status.Conditions}
		}
		return nil
	})
	kubectl(t, "delete", "-n", "default", "-f", "../config/samples/appstack.yaml", "--wait=true", "--timeout=60s")
}

type notReady struct{ conditions any }

func (n *notReady) Error() string {
	out, _ := yaml.Marshal(n.conditions)
	return "not Ready:\n" + string(out)
}
