package chartimport

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/render"
)

// WriteCRDSchemas writes, into each chart kind's CRD in the folder crds
// (as controller-gen wrote it, with a free-form spec), the schema of the
// chart's values: from its values.schema.json, else inferred from
// values.yaml, its values as defaults, each subchart's under its name. It
// returns the notes of what was made free-form or dropped.
func WriteCRDSchemas(crds string, kinds []render.Definition) ([]string, error) {
	var notes []string
	for _, def := range kinds {
		if _, err := fs.Stat(def.Templates, "_chart.yaml"); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		spec, n, err := FolderSchema(def.Templates)
		if err != nil {
			return nil, fmt.Errorf("kind %s: %w", def.GroupVersionKind.Kind, err)
		}
		notes = append(notes, n...)
		if err := writeSpecSchema(crds, def, spec); err != nil {
			return nil, err
		}
	}
	return notes, nil
}

// FolderSchema is the spec schema of a chart kind's folder.
func FolderSchema(fsys fs.FS) (*apiextensionsv1.JSONSchemaProps, []string, error) {
	values, err := readYAMLMap(fsys, "_values.yaml")
	if err != nil {
		return nil, nil, err
	}
	subs, _ := fs.ReadDir(fsys, "_charts")
	for _, e := range subs {
		sub, err := readYAMLMap(fsys, "_charts/"+e.Name()+"/_values.yaml")
		if err != nil {
			return nil, nil, err
		}
		own, _ := values[e.Name()].(map[string]any)
		values[e.Name()] = mergeValues(own, sub)
	}
	jsonSchema, err := fs.ReadFile(fsys, "_values.schema.json")
	if errors.Is(err, fs.ErrNotExist) {
		jsonSchema, err = nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return SpecSchema(values, jsonSchema)
}

func readYAMLMap(fsys fs.FS, name string) (map[string]any, error) {
	data, err := fs.ReadFile(fsys, name)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	out := map[string]any{}
	if err := yaml.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if out == nil {
		out = map[string]any{}
	}
	return out, nil
}

// mergeValues is user over defaults, maps merged key by key (the
// subchart's values under the parent's).
func mergeValues(user, defaults map[string]any) map[string]any {
	out := map[string]any{}
	maps.Copy(out, defaults)
	for k, v := range user {
		um, uok := v.(map[string]any)
		dm, dok := out[k].(map[string]any)
		if uok && dok {
			out[k] = mergeValues(um, dm)
		} else {
			out[k] = v
		}
	}
	return out
}

// writeSpecSchema puts spec into def's CRD in the folder crds.
func writeSpecSchema(crds string, def render.Definition, spec *apiextensionsv1.JSONSchemaProps) error {
	files, err := filepath.Glob(filepath.Join(crds, "*.yaml"))
	if err != nil {
		return err
	}
	gvk := def.GroupVersionKind
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, crd); err != nil || crd.Spec.Group != gvk.Group || crd.Spec.Names.Kind != gvk.Kind {
			continue
		}
		for i, v := range crd.Spec.Versions {
			if v.Name == gvk.Version && v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
				crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"] = *spec
			}
		}
		out, err := yaml.Marshal(crd)
		if err != nil {
			return err
		}
		return os.WriteFile(file, out, 0o644)
	}
	return fmt.Errorf("no CRD of %s in %s: run controller-gen first (make manifests)", gvk.GroupKind(), crds)
}

// Definition imports the chart at dir as the kind gvk in memory, as
// `stencil import chart` writes it (declared from the chart's values and
// values): for a program that runs a chart as a kind without a Go type of
// its own (with [AddToScheme]), and for tests.
func Definition(dir string, gvk schema.GroupVersionKind, values ...map[string]any) (render.Definition, error) {
	c, err := Load(dir)
	if err != nil {
		return render.Definition{}, err
	}
	f, err := Convert(c)
	if err != nil {
		return render.Definition{}, err
	}
	files := []ValuesFile{{Path: "values.yaml", Values: map[string]any{}}}
	for i, v := range values {
		files = append(files, ValuesFile{Path: fmt.Sprintf("values %d", i+1), Values: v})
	}
	decl, err := Declare(gvk, f, files)
	if err != nil {
		return render.Definition{}, err
	}
	return f.definition(gvk, decl), nil
}

// CRD is a chart kind's CRD, as controller-gen and `stencil manifests`
// write it for its Go type: namespaced, a status subresource, the spec's
// schema of the chart's values.
func CRD(def render.Definition, plural string) (*apiextensionsv1.CustomResourceDefinition, error) {
	spec, _, err := FolderSchema(def.Templates)
	if err != nil {
		return nil, err
	}
	gvk := def.GroupVersionKind
	preserve := true
	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + gvk.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: gvk.Group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: strings.ToLower(gvk.Kind), Kind: gvk.Kind, ListKind: gvk.Kind + "List"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: gvk.Version, Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"apiVersion": {Type: "string"}, "kind": {Type: "string"}, "metadata": {Type: "object"},
						"spec": *spec, "status": {Type: "object", XPreserveUnknownFields: &preserve},
					},
				}},
			}},
		},
	}, nil
}
