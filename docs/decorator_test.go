package docs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/internal/testing/testutil"
	"github.com/stencil-operator/stencil/internal/testing/testutil/testop"
	"github.com/stencil-operator/stencil/render"
)

// TestAddADecorator follows docs/add-decorator.md with the files it shows
// (docs/examples/deployment-pdb): a Deployment labelled stencil.dev/pdb=on
// gets a PodDisruptionBudget it owns and an annotation; the label removed,
// both go.
func TestAddADecorator(t *testing.T) {
	const dir = "examples/deployment-pdb"
	doc, err := os.ReadFile("add-decorator.md")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(doc), string(data)) {
			t.Errorf("docs/add-decorator.md does not show %s as it is", f)
		}
	}

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	k8s, err := client.New(cluster.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	d, err := render.LoadDecorator("deployment-pdb", os.DirFS(dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := testop.StartWithDecorators(t.Context(), cluster.Config, scheme, nil, []*render.Decorator{d}, nil); err != nil {
		t.Fatal(err)
	}

	kubectl(t, "create", "deployment", "web", "--image=nginx")
	kubectl(t, "label", "deployment", "web", "stencil.dev/pdb=on")
	key := client.ObjectKey{Namespace: "default", Name: "web"}
	pdb := &policyv1.PodDisruptionBudget{}
	testutil.Eventually(t, 30*time.Second, "PodDisruptionBudget web", func() error {
		return k8s.Get(t.Context(), key, pdb)
	})
	deployment := &appsv1.Deployment{}
	if err := k8s.Get(t.Context(), key, deployment); err != nil {
		t.Fatal(err)
	}
	if refs := pdb.OwnerReferences; len(refs) != 1 || refs[0].UID != deployment.UID {
		t.Errorf("ownerReferences %+v, want the Deployment", refs)
	}
	if pdb.Labels[v1alpha1.LabelDecorator] != "deployment-pdb" || pdb.Labels[v1alpha1.LabelOwnerUID] != string(deployment.UID) {
		t.Errorf("labels %v", pdb.Labels)
	}
	if got := pdb.Spec.Selector.MatchLabels["app"]; got != "web" || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("spec %+v", pdb.Spec)
	}
	testutil.Eventually(t, 30*time.Second, "the Deployment annotated", func() error {
		if err := k8s.Get(t.Context(), key, deployment); err != nil {
			return err
		}
		if deployment.Annotations["stencil.dev/pdb"] != "web" {
			return fmt.Errorf("annotations %v", deployment.Annotations)
		}
		return nil
	})

	kubectl(t, "label", "deployment", "web", "stencil.dev/pdb-")
	testutil.Eventually(t, 30*time.Second, "PodDisruptionBudget pruned, annotation removed", func() error {
		if err := k8s.Get(t.Context(), key, &policyv1.PodDisruptionBudget{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("PodDisruptionBudget still there (%w)", err)
		}
		if err := k8s.Get(t.Context(), key, deployment); err != nil {
			return err
		}
		if v, ok := deployment.Annotations["stencil.dev/pdb"]; ok {
			return fmt.Errorf("annotation still %q", v)
		}
		return nil
	})
}
