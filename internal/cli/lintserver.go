package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/internal/operator/kinds"
	"github.com/stencil-operator/stencil/render"
	renderschema "github.com/stencil-operator/stencil/render/schema"
)

// lintFieldManager is the field manager of lint --server's dry runs.
const lintFieldManager = "stencil-lint"

// lintOnServer is serverLint with a client of the current kubeconfig
// context.
func lintOnServer(ctx context.Context, project *operator, stdin io.Reader, folders []kinds.Folder, v *renderschema.Validator, samples []string) ([]string, error) {
	c, err := newClient(project)
	if err != nil {
		return nil, err
	}
	problems, _, err := serverLint(ctx, c, stdin, folders, v, samples)
	return problems, err
}

// serverLint dry-runs every custom resource of the sample files, then
// every object it renders, against the cluster of c: a server-side apply
// with dryRun=All and strict field validation, which stores nothing. It
// returns one line per object the API server refuses, and how many
// resources it checked: what only the server knows (CEL rules, admission
// policies and webhooks, namespaces, served versions).
func serverLint(ctx context.Context, c client.Client, stdin io.Reader, folders []kinds.Folder, v *renderschema.Validator, samples []string) ([]string, int, error) {
	files, err := sampleFiles(samples)
	if err != nil {
		return nil, 0, err
	}
	var problems []string
	checked := 0
	for _, file := range files {
		crs, err := readResourcesOf(file, stdin, "default", kindsOf(folders), v)
		if err != nil {
			return nil, 0, err
		}
		for _, cr := range crs {
			checked++
			problems = append(problems, serverLintResource(ctx, c, file, cr)...)
		}
	}
	return problems, checked, nil
}

// serverLintResource dry-runs cr, and the objects it renders with the UID
// the dry run gave it (their owner references name it).
func serverLintResource(ctx context.Context, c client.Client, file string, cr resource) []string {
	at := fmt.Sprintf("%s: %s %s", file, cr.kind.GroupVersionKind().Kind, cr.obj.GetName())
	var problems []string
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(cr.doc, &u.Object); err != nil {
		return []string{fmt.Sprintf("%s: %v", at, err)}
	}
	u.SetNamespace(cr.obj.GetNamespace())
	if applied, err := dryRunApply(ctx, c, u); err != nil {
		problems = append(problems, fmt.Sprintf("%s: the API server refuses it: %v", at, err))
	} else {
		cr.obj.SetUID(applied.GetUID())
	}
	plan, err := cr.kind.RenderGraph(cr.obj, render.GraphInput{})
	if err != nil {
		return append(problems, fmt.Sprintf("%s: %v", at, placeError(err, folderOf(cr.kind))))
	}
	for _, o := range plan.Objects {
		if cr.obj.GetUID() == "" {
			o.SetOwnerReferences(nil) // no owner to name: the resource was refused
		}
		if _, err := dryRunApply(ctx, c, o); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %s %s: the API server refuses it: %v", at, o.GetKind(), objectName(o.GetNamespace(), o.GetName()), err))
		}
	}
	return problems
}

// dryRunApply applies o with dryRun=All and fieldValidation=Strict and
// returns the object the API server would store.
func dryRunApply(ctx context.Context, c client.Client, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(o.Object)
	if err != nil {
		return nil, err
	}
	out := o.DeepCopy()
	err = c.Patch(ctx, out, client.RawPatch(types.ApplyPatchType, data),
		client.DryRunAll, client.FieldOwner(lintFieldManager), client.ForceOwnership, client.FieldValidation("Strict"))
	return out, err
}
