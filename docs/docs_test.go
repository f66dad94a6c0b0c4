// Package docs_test follows the worked examples of the docs on a local
// control plane, with the very files the docs show (docs/examples/).
package docs_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	operatorv1 "github.com/stencil-operator/stencil/api/operator/v1"
	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/internal/dev/localcluster"
	"github.com/stencil-operator/stencil/internal/testing/samples"
	"github.com/stencil-operator/stencil/internal/testing/testutil"
	"github.com/stencil-operator/stencil/internal/testing/testutil/testop"
	"github.com/stencil-operator/stencil/render"
	"github.com/stencil-operator/stencil/render/kindtest"
	"github.com/stencil-operator/stencil/render/schema"
	"github.com/stencil-operator/stencil/templates"
)

var cluster *localcluster.Cluster

func TestMain(m *testing.M) {
	os.Exit(localcluster.RunTests(m, localcluster.Options{}, &cluster))
}

// withFiles is a kind folder with some files added or replaced, as a user's
// edit of templates/<kind>/ would leave it.
func withFiles(t *testing.T, base fs.FS, dir string) fs.FS {
	t.Helper()
	folder := fstest.MapFS{}
	for _, from := range []fs.FS{base, os.DirFS(dir)} {
		files, err := fs.ReadDir(from, ".")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if f.IsDir() {
				continue // tests/: the template tests, not templates
			}
			data, err := fs.ReadFile(from, f.Name())
			if err != nil {
				t.Fatal(err)
			}
			folder[f.Name()] = &fstest.MapFile{Data: data}
		}
	}
	return folder
}

func myWeb(t *testing.T, folder fs.FS) *render.Kind {
	t.Helper()
	k, err := render.Load(render.Definition{
		GroupVersionKind: operatorv1.GroupVersion.WithKind("MyWeb"),
		New:              func() v1alpha1.Object { return &operatorv1.MyWeb{} },
		Templates:        folder,
	})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestAddAnOwnedResource follows docs/add-owned-resource.md: add a
// PodDisruptionBudget to MyWeb with a template and a line in _kind.yaml, see
// it applied; take it away again, see it pruned.
func TestAddAnOwnedResource(t *testing.T) {
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
	crds := fstest.MapFS{}
	data, err := os.ReadFile("../config/crd/bases/operator.k8s-summit.org_mywebs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crds["myweb.yaml"] = &fstest.MapFile{Data: data}
	if err := testutil.InstallCRDs(t.Context(), k8s, crds); err != nil {
		t.Fatal(err)
	}

	// Step 1 and 2 of the doc: the new template and the new line in _kind.yaml.
	withPDB := myWeb(t, withFiles(t, templates.Kind("myweb"), "examples/myweb-pdb"))
	ctx, stop := context.WithCancel(t.Context())
	stopped, err := testop.RunOperator(ctx, cluster.Config, scheme, []*render.Kind{withPDB}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubectl(t, "apply", "-f", "../config/samples/myweb.yaml")
	pdb := &policyv1.PodDisruptionBudget{}
	testutil.Eventually(t, 30*time.Second, "PodDisruptionBudget applied", func() error {
		return k8s.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "myweb"}, pdb)
	})
	if pdb.Labels[v1alpha1.LabelManagedBy] != "stencil" || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("PodDisruptionBudget labels %v, maxUnavailable %v", pdb.Labels, pdb.Spec.MaxUnavailable)
	}

	testutil.Eventually(t, 30*time.Second, "the PodDisruptionBudget in status.inventory", func() error {
		web := &operatorv1.MyWeb{}
		if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "myweb"}, web); err != nil {
			return err
		}
		for _, e := range web.Status.Inventory {
			if e.Kind == "PodDisruptionBudget" {
				return nil
			}
		}
		return fmt.Errorf("inventory %v", web.Status.Inventory)
	})

	// The last step: remove the template again (the operator restarts with
	// the original folder), and the PodDisruptionBudget is pruned.
	stop()
	select { // the first operator's reconciles in flight have ended
	case err := <-stopped:
		if err != nil {
			t.Fatalf("the first operator stopped with %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the operator has not stopped within a minute")
	}
	original := myWeb(t, templates.Kind("myweb"))
	if err := testop.StartOperator(t.Context(), cluster.Config, scheme, []*render.Kind{original}, nil); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "PodDisruptionBudget pruned", func() error {
		err := k8s.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "myweb"}, &policyv1.PodDisruptionBudget{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%w)", err)
		}
		return nil
	})
}

func kubectl(t *testing.T, args ...string) {
	t.Helper()
	bin, err := localcluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), filepath.Join(bin, "kubectl"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
}

// TestEditLintTest follows docs/add-kind.md's "Edit, lint, test": the
// owned-resource guide's PodDisruptionBudget passes the schema check on
// MyWeb's template tests, and the same template with the typo fails with the
// exact line the guide prints.
func TestEditLintTest(t *testing.T) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	data, err := os.ReadFile("../config/crd/bases/operator.k8s-summit.org_mywebs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, crd); err != nil {
		t.Fatal(err)
	}
	v, err := schema.New(crd) // MyWeb's CRD defaults the cases' inputs, as stencil test does
	if err != nil {
		t.Fatal(err)
	}
	seed, err := kindtest.Cases(templates.Kind("myweb"))
	if err != nil || len(seed) == 0 {
		t.Fatalf("MyWeb's template tests: %v", err)
	}
	withPDB := withFiles(t, templates.Kind("myweb"), "examples/myweb-pdb")
	for _, c := range seed {
		delete(c.Files, kindtest.ExpectedFile) // it now holds a PodDisruptionBudget too
		if out := kindtest.RunKind(myWeb(t, withPDB), c, v); out.Err != nil {
			t.Errorf("the guide's template, case %s: %v", c.Name, out.Err)
		}
	}
	pdb, err := fs.ReadFile(withPDB, "pdb.yaml")
	if err != nil {
		t.Fatal(err)
	}
	typo := withPDB.(fstest.MapFS)
	typo["pdb.yaml"] = &fstest.MapFile{Data: []byte(strings.Replace(string(pdb), "maxUnavailable:", "maxUnavailabel:", 1))}
	guide, err := os.ReadFile("add-kind.md")
	if err != nil {
		t.Fatal(err)
	}
	var want string
	for line := range strings.SplitSeq(string(guide), "\n") {
		if strings.HasPrefix(line, "templates/myweb/pdb.yaml:") {
			want = strings.TrimPrefix(line, "templates/myweb/")
		}
	}
	if want == "" {
		t.Fatal("docs/add-kind.md shows no error line")
	}
	c := seed[len(seed)-1]
	if c.Name != "seed" {
		t.Fatalf("the last case is %s, want seed (the MyWeb named myweb)", c.Name)
	}
	out := kindtest.RunKind(myWeb(t, typo), c, v)
	if out.Err == nil || !strings.HasSuffix(out.Err.Error(), want) {
		t.Errorf("the typo fails with\n  %v\nthe guide shows\n  %s", out.Err, want)
	}
}
