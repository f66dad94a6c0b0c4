package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/internal/kinds"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testkind/v1alpha1"
	"github.com/stencil-operator/stencil/render"
)

// The summary counts resources by what happens to them and objects by
// what happens to each; the details list only resources that change or
// fail, in order, with their diffs.
func TestFleetReport(t *testing.T) {
	loaded, err := kinds.Load()
	if err != nil {
		t.Fatal(err)
	}
	diffs := []*resourceDiff{
		{kind: "MyWeb", namespace: "b", name: "web", changed: []string{"Deployment b/web"}, diffs: []string{"--- live/Deployment/b/web\n"}},
		{kind: "MyWeb", namespace: "a", name: "web", created: []string{"ConfigMap a/extra"}, pruned: []string{"Service a/web"}, diffs: []string{"+++ merged/ConfigMap/a/extra\n"}},
		{kind: "MyWeb", namespace: "a", name: "same"},
		{kind: "Foo", namespace: "a", name: "broken", err: errors.New("template: deployment.yaml:3: boom"), render: true},
	}
	var details, summary bytes.Buffer
	if err := printDetails(&details, diffs); err != nil {
		t.Fatal(err)
	}
	if err := printSummary(&summary, loaded, diffs); err != nil {
		t.Fatal(err)
	}
	wantDetails := "# Foo a/broken\n#   error: template: deployment.yaml:3: boom\n" +
		"# MyWeb a/web\n#   create ConfigMap a/extra\n#   prune Service a/web\n+++ merged/ConfigMap/a/extra\n" +
		"# MyWeb b/web\n#   change Deployment b/web\n--- live/Deployment/b/web\n"
	if details.String() != wantDetails {
		t.Errorf("details:\n%s\nwant:\n%s", details.String(), wantDetails)
	}
	for _, line := range []string{
		"KIND          RESOURCES  UNCHANGED  CHANGED  FAILING  CREATE  CHANGE  PRUNE",
		"Foo           1          0          0        1        0       0       0",
		"Guestbook     0          0          0        0        0       0       0",
		"MyWeb         3          1          2        0        1       1       1",
	} {
		if !strings.Contains(summary.String(), line+"\n") {
			t.Errorf("summary lacks %q:\n%s", line, summary.String())
		}
	}
}

// diff takes -f or --all, not both, not neither.
func TestDiffNeedsOneInput(t *testing.T) {
	for _, args := range [][]string{{"diff"}, {"diff", "--all", "-f", "x.yaml"}} {
		cmd := newRootCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(args)
		err := cmd.Execute()
		var exit *exitError
		if !errors.As(err, &exit) || exit.code != 2 || !strings.Contains(err.Error(), "either -f FILE or --all") {
			t.Errorf("%v: %v, want exit 2 asking for one input", args, err)
		}
	}
}

// previewKind is a Widget whose templates render a ConfigMap when
// spec.message is set and a Service when spec.service is: with neither,
// nothing.
func previewKind(t *testing.T) *render.Kind {
	t.Helper()
	k, err := render.Load(render.Definition{
		GroupVersionKind: testv1alpha1.GroupVersion.WithKind("Widget"),
		New:              func() v1alpha1.Object { return &testv1alpha1.Widget{} },
		Templates: fstest.MapFS{
			"_kind.yaml": {Data: []byte("owns:\n- {apiVersion: v1, kind: ConfigMap}\n- {apiVersion: v1, kind: Service}\n")},
			"configmap.yaml": {Data: []byte("{{- if .Spec.Message -}}\napiVersion: v1\nkind: ConfigMap\n" +
				"metadata: {name: {{ .Name | quote }}}\ndata: {message: {{ .Spec.Message | quote }}}\n{{- end }}\n")},
			"service.yaml": {Data: []byte("{{- if .Spec.Service -}}\napiVersion: v1\nkind: Service\n" +
				"metadata: {name: {{ .Name | quote }}}\nspec: {ports: [{port: 80}]}\n{{- end }}\n")},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// The preview counts as pruned only what the operator would prune: not
// after an empty render of a resource that has objects (it fails, as the
// reconcile does with EmptyRender), not while an object it renders is in
// the way (someone else's, or on its way out), not after a refused apply.
func TestFleetPrunesOnlyWhatTheOperatorWould(t *testing.T) {
	k := previewKind(t)
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), testv1alpha1.AddToScheme(scheme)); err != nil {
		t.Fatal(err)
	}
	// widget is the resource as an earlier render left it: a ConfigMap
	// and a Service, both in its inventory.
	widget := func(message string, inventory bool) *testv1alpha1.Widget {
		w := &testv1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "w", UID: "uid-w"}, Spec: testv1alpha1.WidgetSpec{Message: message}}
		if inventory {
			w.Status.Inventory = []v1alpha1.InventoryEntry{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "a", Name: "w"}, {APIVersion: "v1", Kind: "Service", Namespace: "a", Name: "w"}}
		}
		return w
	}
	earlier := widget("m", true)
	earlier.Spec.Service = true
	objs, err := k.Render(earlier)
	if err != nil {
		t.Fatal(err)
	}
	var configMap, service *unstructured.Unstructured
	for _, o := range objs {
		o.SetResourceVersion("")
		switch o.GetKind() {
		case "ConfigMap":
			configMap = o
		case "Service":
			service = o
		}
	}
	// Someone else's ConfigMap of the same name.
	theirs := &unstructured.Unstructured{}
	theirs.SetGroupVersionKind(configMap.GroupVersionKind())
	theirs.SetNamespace("a")
	theirs.SetName("w")
	// Ours, on its way out (a finalizer holds it).
	leaving := configMap.DeepCopy()
	leaving.SetFinalizers([]string{"example.com/hold"})
	leaving.SetDeletionTimestamp(&metav1.Time{Time: time.Now()})
	refused := interceptor.Funcs{Apply: func(context.Context, client.WithWatch, runtime.ApplyConfiguration, ...client.ApplyOption) error {
		return apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "w", field.ErrorList{field.Forbidden(field.NewPath("data"), "no")})
	}}
	tests := []struct {
		name       string
		cr         *testv1alpha1.Widget
		live       []*unstructured.Unstructured
		apply      *interceptor.Funcs
		wantPruned []string
		wantKept   []string
		wantErr    string
	}{
		{"the Service is no longer rendered", widget("m", true), []*unstructured.Unstructured{configMap, service}, nil, []string{"Service a/w"}, nil, ""},
		{"an empty render", widget("", true), []*unstructured.Unstructured{configMap, service}, nil, nil, nil, "renders no objects; stencil will not prune its 2 objects (reason EmptyRender)"},
		{"an empty render and no inventory", widget("", false), []*unstructured.Unstructured{configMap, service}, nil, []string{"ConfigMap a/w", "Service a/w"}, nil, ""},
		{"the ConfigMap is someone else's", widget("m", true), []*unstructured.Unstructured{theirs, service}, nil, nil, []string{"Service a/w"}, ""},
		{"the ConfigMap is being deleted", widget("m", true), []*unstructured.Unstructured{leaving, service}, nil, nil, []string{"Service a/w"}, ""},
		{"the ConfigMap's apply is refused", widget("m", true), []*unstructured.Unstructured{configMap, service}, &refused, nil, nil, "dry-run apply of ConfigMap/a/w"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(scheme)
			for _, o := range tt.live {
				b = b.WithObjects(o.DeepCopy())
			}
			if tt.apply != nil {
				b = b.WithInterceptorFuncs(*tt.apply)
			}
			c := b.Build()
			live := &liveObjects{reader: c}
			live.prefetch(t.Context(), c, k)
			d := diffResource(t.Context(), c, live, k, tt.cr)
			if (d.err == nil) != (tt.wantErr == "") || d.err != nil && !strings.Contains(d.err.Error(), tt.wantErr) {
				t.Errorf("error %v, want %q", d.err, tt.wantErr)
			}
			if !slices.Equal(d.pruned, tt.wantPruned) {
				t.Errorf("pruned %q, want %q", d.pruned, tt.wantPruned)
			}
			var details, summary bytes.Buffer
			if err := errors.Join(printDetails(&details, []*resourceDiff{d}), printSummary(&summary, []*render.Kind{k}, []*resourceDiff{d})); err != nil {
				t.Fatal(err)
			}
			if kept := regexp.MustCompile(`(?m)^#   keep (.*): stencil prunes nothing while`).FindAllStringSubmatch(details.String(), -1); len(kept) != len(tt.wantKept) {
				t.Errorf("details keep %q, want %q:\n%s", kept, tt.wantKept, details.String())
			} else {
				for i, m := range kept {
					if m[1] != tt.wantKept[i] {
						t.Errorf("details keep %q, want %q", m[1], tt.wantKept[i])
					}
				}
			}
			if !strings.HasSuffix(strings.TrimSpace(summary.String()), fmt.Sprintf(" %d", len(tt.wantPruned))) {
				t.Errorf("summary counts other prunes than %d:\n%s", len(tt.wantPruned), summary.String())
			}
		})
	}
}
