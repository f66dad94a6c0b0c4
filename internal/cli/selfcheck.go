package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/internal/operator/kinds"
	"github.com/stencil-operator/stencil/render"
	renderschema "github.com/stencil-operator/stencil/render/schema"
)

// crdDefaults is what defaults the inputs of the templates' test cases in
// the start-up check and on a reload, as the API server defaults a
// resource: the kinds' CRDs as the cluster has them. A kind whose CRD
// cannot be read (not served yet, or RBAC older than the ClusterRole
// `stencil manifests` writes) has its cases rendered as they are, with a
// log line that says so.
func crdDefaults(ctx context.Context, cfg *rest.Config, folders []kinds.Folder, log logr.Logger) (render.Validator, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("reading the kinds' CRDs: %w", err)
	}
	c, err := crdClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("reading the kinds' CRDs: %w", err)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range folders {
		if f.Kind == nil {
			continue
		}
		crd, err := kindCRD(ctx, dc, c, f.Kind)
		if err != nil {
			log.Info("The test cases of this kind are checked without its CRD's defaults", "kind", f.Kind.GroupVersionKind().Kind, "reason", err.Error())
			continue
		}
		crds = append(crds, crd)
	}
	v, err := renderschema.New(crds...)
	if err != nil {
		return nil, err
	}
	return kinds.DefaultsOnly(v), nil
}

// crdClient is a client of CRDs, and of the types the adders add.
func crdClient(cfg *rest.Config, adders ...func(*runtime.Scheme) error) (client.Client, error) {
	scheme := runtime.NewScheme()
	for _, add := range append([]func(*runtime.Scheme) error{apiextensionsv1.AddToScheme}, adders...) {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// kindCRD reads k's CRD, named by the resource that discovery serves for
// its kind.
func kindCRD(ctx context.Context, dc discovery.DiscoveryInterface, c client.Client, k *render.Kind) (*apiextensionsv1.CustomResourceDefinition, error) {
	gvk := k.GroupVersionKind()
	resources, err := dc.ServerResourcesForGroupVersion(gvk.GroupVersion().String())
	if err != nil {
		return nil, fmt.Errorf("%s is not served: %w", gvk.GroupVersion(), err)
	}
	for _, r := range resources.APIResources {
		if r.Kind != gvk.Kind || strings.Contains(r.Name, "/") {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: r.Name + "." + gvk.Group}, crd); err != nil {
			return nil, fmt.Errorf("reading the CRD %s.%s: %w", r.Name, gvk.Group, err)
		}
		return crd, nil
	}
	return nil, fmt.Errorf("%s serves no %s", gvk.GroupVersion(), gvk.Kind)
}
