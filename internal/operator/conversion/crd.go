package conversion

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// Service is the Service the API server sends conversions to, in a cluster.
type Service struct{ Namespace, Name string }

// WriteCRDWebhooks writes, into the CRD file (in the folder crds) of each
// kind of kinds, its conversion webhook: strategy Webhook, to svc's
// /convert. stencil writes the CA bundle at run time (or cert-manager's CA
// injector does). `stencil manifests` runs it after controller-gen.
func WriteCRDWebhooks(crds string, kinds []schema.GroupKind, svc Service) error {
	if len(kinds) == 0 {
		return nil
	}
	files, err := filepath.Glob(filepath.Join(crds, "*.yaml"))
	if err != nil {
		return err
	}
	left := map[schema.GroupKind]bool{}
	for _, gk := range kinds {
		left[gk] = true
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		crd := map[string]any{}
		if err := yaml.Unmarshal(data, &crd); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		spec, _ := crd["spec"].(map[string]any)
		names, _ := spec["names"].(map[string]any)
		group, _ := spec["group"].(string)
		kind, _ := names["kind"].(string)
		gk := schema.GroupKind{Group: group, Kind: kind}
		if !left[gk] {
			continue
		}
		delete(left, gk)
		spec["conversion"] = map[string]any{
			"strategy": "Webhook",
			"webhook": map[string]any{
				"conversionReviewVersions": []string{"v1"},
				"clientConfig": map[string]any{
					"service": map[string]any{"namespace": svc.Namespace, "name": svc.Name, "path": Path},
				},
			},
		}
		out, err := yaml.Marshal(crd)
		if err != nil {
			return err
		}
		if err := os.WriteFile(file, append([]byte("---\n"), out...), 0o644); err != nil {
			return err
		}
	}
	for gk := range left {
		return fmt.Errorf("no CRD of %s in %s: run controller-gen first (make manifests)", gk, crds)
	}
	return nil
}
