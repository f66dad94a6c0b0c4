package testop

import (
	"context"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/internal/testing/testkind"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
	"github.com/stencil-operator/stencil/internal/testing/testutil"
	"github.com/stencil-operator/stencil/render"
)

// Widgets is what the tests of stencil's controllers share: a client (cluster
// admin) whose scheme knows Kubernetes' types, CRDs and the test kinds, with
// the test kinds' CRDs installed, and the Widget kind loaded.
type Widgets struct {
	Client client.Client
	Scheme *runtime.Scheme
	Widget *render.Kind
}

// SetUpWidgets installs the test kinds' CRDs on the cluster of cfg and
// returns the Widgets set-up.
func SetUpWidgets(ctx context.Context, cfg *rest.Config) (Widgets, error) {
	w := Widgets{Scheme: runtime.NewScheme()}
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, testv1alpha1.AddToScheme} {
		if err := add(w.Scheme); err != nil {
			return Widgets{}, err
		}
	}
	var err error
	if w.Client, err = client.New(cfg, client.Options{Scheme: w.Scheme}); err != nil {
		return Widgets{}, err
	}
	if err := testutil.InstallCRDs(ctx, w.Client, testkind.CRDs()); err != nil {
		return Widgets{}, err
	}
	w.Widget, err = render.Load(testkind.Widget())
	return w, err
}
