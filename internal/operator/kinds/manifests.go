package kinds

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// ClusterRoleYAML is the file config/rbac/role.yaml: the least RBAC the
// set's kinds and decorators need, with the resource names the CRDs in the
// folders crds declare (a folder that does not exist is skipped).
func (s Set) ClusterRoleYAML(crds ...string) ([]byte, error) {
	loaded, err := s.Load()
	if err != nil {
		return nil, err
	}
	decorators, err := s.LoadDecorators()
	if err != nil {
		return nil, err
	}
	plurals := map[schema.GroupKind]string{}
	for _, dir := range crds {
		found, err := CRDPlurals(dir)
		if err != nil {
			return nil, err
		}
		maps.Copy(plurals, found)
	}
	return ClusterRoleYAML(s.Name, loaded, decorators, plurals)
}

// GraphDeletionPolicyYAML is the file config/policy/graph_deletion.yaml,
// from the set's kinds and their CRDs in the folder crds (which name their
// resources).
func (s Set) GraphDeletionPolicyYAML(crds string) ([]byte, error) {
	loaded, err := s.Load()
	if err != nil {
		return nil, err
	}
	plurals, err := CRDPlurals(crds)
	if err != nil {
		return nil, err
	}
	return GraphDeletionPolicyYAML(s.Name, loaded, plurals)
}

// DecoratorNames are the set's decorators' names.
func (s Set) DecoratorNames() []string {
	names := make([]string, 0, len(s.Decorators))
	for _, d := range s.Decorators {
		names = append(names, d.Name)
	}
	return names
}

// CRDPlurals are the resource names the CRDs in dir declare, by group and
// kind.
func CRDPlurals(dir string) (map[schema.GroupKind]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	plurals := map[schema.GroupKind]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		crd := apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, &crd); err != nil {
			return nil, fmt.Errorf("reading %s: %w", f, err)
		}
		if crd.Kind != "CustomResourceDefinition" {
			continue // kustomization.yaml, or another file beside them
		}
		plurals[schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}] = crd.Spec.Names.Plural
	}
	return plurals, nil
}
