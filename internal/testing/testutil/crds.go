package testutil

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// InstallCRDs creates every CRD in the *.yaml files of crds and waits until
// each is established.
func InstallCRDs(ctx context.Context, c client.Client, crds fs.FS) error {
	files, err := fs.Glob(crds, "*.yaml")
	if err != nil {
		return err
	}
	for _, f := range files {
		data, err := fs.ReadFile(crds, f)
		if err != nil {
			return err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, crd); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if err := c.Create(ctx, crd); err != nil {
			return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
		}
		if err := waitEstablished(ctx, c, crd.Name); err != nil {
			return err
		}
		if err := waitServed(ctx, c, crd); err != nil {
			return err
		}
	}
	return nil
}

func waitEstablished(ctx context.Context, c client.Client, name string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err == nil {
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return nil
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("CRD %s not established", name)
}

// waitServed waits until the API server's discovery serves crd's kind,
// which can lag behind Established: a manager started in between would
// find no REST mapping for it.
func waitServed(ctx context.Context, c client.Client, crd *apiextensionsv1.CustomResourceDefinition) error {
	gk := schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := c.RESTMapper().RESTMapping(gk)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("CRD %s not served: %w", crd.Name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// SchemalessCRD is the YAML of the CRD of a namespaced type kind of group,
// at v1, whose objects hold anything; plural is its resource name.
func SchemalessCRD(group, kind, plural string) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[3]s.%[1]s
spec:
  group: %[1]s
  names: {kind: %[2]s, listKind: %[2]sList, plural: %[3]s, singular: %[4]s}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`, group, kind, plural, strings.ToLower(kind))
}
