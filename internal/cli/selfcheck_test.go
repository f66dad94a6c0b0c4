package cli

import (
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/internal/dev/localcluster"
	"github.com/stencil-operator/stencil/internal/operator/kinds"
	"github.com/stencil-operator/stencil/internal/testing/testkind"
	"github.com/stencil-operator/stencil/internal/testing/testutil"
	"github.com/stencil-operator/stencil/render"
)

// TestStartUpCheckDefaultsFromTheClustersCRD: a test case that leaves out
// a field its CRD defaults renders in the start-up check (and on a reload)
// as the operator renders the resource the API server stored: defaulted
// from the kind's CRD as the cluster has it. Without the defaults, the
// operator refused to start on templates that `stencil test` passes.
func TestStartUpCheckDefaultsFromTheClustersCRD(t *testing.T) {
	cluster := startAPIServer(t)
	installWidgetCRDWithDefault(t, cluster)
	def := testkind.Widget()
	def.Templates = fstest.MapFS{
		"_kind.yaml":     {Data: []byte("owns: [{apiVersion: v1, kind: ConfigMap}]")},
		"configmap.yaml": {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ .Name | quote }}}\ndata: {message: {{ required \"spec.message is required\" .Spec.Message | quote }}}\n")},
		// The case gives no message: its CRD's default fills it in.
		"tests/defaulted/input.yaml": {Data: []byte("apiVersion: test.stencil.dev/v1alpha1\nkind: Widget\nmetadata: {name: w, namespace: default, uid: uid-w}\nspec: {replicas: 1}\n")},
	}
	k, err := render.Load(def)
	if err != nil {
		t.Fatal(err)
	}
	folders := []kinds.Folder{{Name: "widget", FS: def.Templates, Kind: k}}

	if err := kinds.CheckRenders(folders, nil); err == nil || !strings.Contains(err.Error(), "spec.message is required") {
		t.Fatalf("without the CRD's defaults the case renders: %v; want it to fail (the test is moot)", err)
	}
	defaults, err := crdDefaults(t.Context(), cluster.Config, folders, ctrl.Log)
	if err != nil {
		t.Fatal(err)
	}
	if err := kinds.CheckRenders(folders, defaults); err != nil {
		t.Errorf("with the cluster's CRD the case fails: %v", err)
	}

	// A kind whose CRD cannot be read (a namespace-scoped install may not
	// read CRDs) renders its cases as they are, as before.
	unread := samples
	shipped, err := unread.Folders("")
	if err != nil {
		t.Fatal(err)
	}
	if err := kinds.CheckRenders(shipped, defaults); err != nil {
		t.Errorf("kinds whose CRDs were not read fail the check: %v", err)
	}
}

// installWidgetCRDWithDefault installs the test kind's CRD with a default
// for spec.message.
func installWidgetCRDWithDefault(t *testing.T, cluster *localcluster.Cluster) {
	t.Helper()
	data, err := fs.ReadFile(testkind.CRDs(), "test.stencil.dev_widgets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		t.Fatal(err)
	}
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	message := spec.Properties["message"]
	message.Default = &apiextensionsv1.JSON{Raw: []byte(`"from the CRD"`)}
	spec.Properties["message"] = message
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cluster.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	if err := testutil.InstallCRDs(t.Context(), c, fstest.MapFS{"widgets.yaml": {Data: out}}); err != nil {
		t.Fatal(err)
	}
}
