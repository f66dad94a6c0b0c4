// Command policygen writes config/policy/graph_deletion.yaml, the admission
// policy that refuses a foreground deletion of a graph kind's resource, from
// the registered kinds' declarations and their CRDs (config/crd/bases, for
// the resource names). `make manifests` runs it after controller-gen.
//
// Usage: go run ./hack/policygen [-crds config/crd/bases] [config/policy/graph_deletion.yaml]
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/internal/kinds"
)

func main() {
	crds := flag.String("crds", "config/crd/bases", "Folder of the kinds' CRDs, which name their resources.")
	flag.Parse()
	path := "config/policy/graph_deletion.yaml"
	if flag.NArg() > 0 {
		path = flag.Arg(0)
	}
	out, err := policy(*crds)
	if err == nil {
		err = os.WriteFile(path, out, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "policygen:", err)
		os.Exit(1)
	}
}

// policy is the file's content, from the registered kinds and the CRDs in
// the folder crds.
func policy(crds string) ([]byte, error) {
	loaded, err := kinds.Load()
	if err != nil {
		return nil, err
	}
	plurals, err := crdPlurals(crds)
	if err != nil {
		return nil, err
	}
	return kinds.GraphDeletionPolicyYAML(loaded, plurals)
}

// crdPlurals are the resource names the CRDs in dir declare, by group and
// kind.
func crdPlurals(dir string) (map[schema.GroupKind]string, error) {
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
		plurals[schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}] = crd.Spec.Names.Plural
	}
	return plurals, nil
}
