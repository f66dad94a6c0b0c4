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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
	"github.com/stencil-operator/stencil/render"
)

// The summary counts resources by what happens to them and objects by
// what happens to each; the details list only resources that change or
// fail, in order, with their diffs.
func TestFleetReport(t *testing.T) {
	loaded, err := sampleKinds()
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
		cmd := newRootCommand(samples)
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
// The objects live in a real API server, one namespace per case, and the
// dry-run applies are that API server's.
func TestFleetPrunesOnlyWhatTheOperatorWould(t *testing.T) {
	k := previewKind(t)
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), testv1alpha1.AddToScheme(scheme)); err != nil {
		t.Fatal(err)
	}
	cluster := startAPIServer(t)
	c, err := client.New(cluster.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	// widget is the resource in namespace ns; with inventory, as an
	// earlier render left it: a ConfigMap and a Service, both named w.
	// Its UID is in its objects' labels and ownerReferences; the Widget
	// itself need not exist.
	widget := func(ns, message string, inventory bool) *testv1alpha1.Widget {
		w := &testv1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w", UID: "uid-w"}, Spec: testv1alpha1.WidgetSpec{Message: message}}
		if inventory {
			w.Status.Inventory = []v1alpha1.InventoryEntry{{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "w"}, {APIVersion: "v1", Kind: "Service", Namespace: ns, Name: "w"}}
		}
		return w
	}
	// objects are the live objects a case can start from, in namespace ns.
	objects := func(t *testing.T, ns string) map[string]*unstructured.Unstructured {
		t.Helper()
		earlier := widget(ns, "m", true)
		earlier.Spec.Service = true
		objs, err := k.Render(earlier)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*unstructured.Unstructured{}
		for _, o := range objs {
			switch o.GetKind() {
			case "ConfigMap":
				out["ours"] = o
			case "Service":
				out["service"] = o
			}
		}
		// Someone else's ConfigMap of the same name.
		theirs := &unstructured.Unstructured{}
		theirs.SetGroupVersionKind(out["ours"].GroupVersionKind())
		theirs.SetNamespace(ns)
		theirs.SetName("w")
		out["theirs"] = theirs
		// Ours, to be deleted while a finalizer holds it.
		leaving := out["ours"].DeepCopy()
		leaving.SetFinalizers([]string{"example.com/hold"})
		out["leaving"] = leaving
		// Ours, but immutable and with other data than the render's: the
		// API server refuses the apply.
		frozen := out["ours"].DeepCopy()
		frozen.Object["immutable"] = true
		frozen.Object["data"] = map[string]any{"message": "before"}
		out["frozen"] = frozen
		return out
	}
	// in names objects w of kinds in namespace ns, as the preview does.
	in := func(ns string, kinds []string) []string {
		var out []string
		for _, kind := range kinds {
			out = append(out, kind+" "+ns+"/w")
		}
		return out
	}
	tests := []struct {
		name       string
		message    string // of the Widget now
		inventory  bool
		live       []string // keys of objects
		wantPruned []string // kinds of the objects w in the case's namespace
		wantKept   []string
		wantErr    string // NS stands for the case's namespace
	}{
		{"the Service is no longer rendered", "m", true, []string{"ours", "service"}, []string{"Service"}, nil, ""},
		{"an empty render", "", true, []string{"ours", "service"}, nil, nil, "renders no objects; stencil will not prune its 2 objects (reason EmptyRender)"},
		{"an empty render and no inventory", "", false, []string{"ours", "service"}, []string{"ConfigMap", "Service"}, nil, ""},
		{"the ConfigMap is someone else's", "m", true, []string{"theirs", "service"}, nil, []string{"Service"}, ""},
		{"the ConfigMap is being deleted", "m", true, []string{"leaving", "service"}, nil, []string{"Service"}, ""},
		{"the ConfigMap's apply is refused", "m", true, []string{"frozen", "service"}, nil, nil,
			`dry-run apply of ConfigMap/NS/w: ConfigMap "w" is invalid: data: Forbidden: field is immutable when ` + "`immutable`" + ` is set`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			ns := fmt.Sprintf("case-%d", i)
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				t.Fatal(err)
			}
			objs := objects(t, ns)
			for _, key := range tt.live {
				o := objs[key].DeepCopy()
				if err := c.Create(ctx, o); err != nil {
					t.Fatalf("creating %s: %v", key, err)
				}
				// Every case's objects carry the same owner UID, and the
				// preview looks for them in every namespace: the next case
				// must not find these.
				t.Cleanup(func() {
					ctx := context.Background() // t.Context() is done by now
					if len(o.GetFinalizers()) > 0 {
						patch := client.MergeFrom(o.DeepCopy())
						o.SetFinalizers(nil)
						if err := c.Patch(ctx, o, patch); client.IgnoreNotFound(err) != nil {
							t.Error(err)
						}
					}
					if err := c.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
						t.Error(err)
					}
				})
				if key == "leaving" {
					if err := c.Delete(ctx, o); err != nil {
						t.Fatal(err)
					}
					if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil || o.GetDeletionTimestamp() == nil {
						t.Fatalf("the deleted ConfigMap: %v, deletionTimestamp %v; want it held by its finalizer", err, o.GetDeletionTimestamp())
					}
				}
			}
			cr := widget(ns, tt.message, tt.inventory)
			live := &liveObjects{reader: c}
			live.prefetch(ctx, c, k)
			d := diffResource(ctx, c, live, k, cr)
			wantErr := strings.ReplaceAll(tt.wantErr, "NS", ns)
			if (d.err == nil) != (wantErr == "") || d.err != nil && !strings.Contains(d.err.Error(), wantErr) {
				t.Errorf("error %v, want %q", d.err, wantErr)
			}
			wantPruned, wantKept := in(ns, tt.wantPruned), in(ns, tt.wantKept)
			if !slices.Equal(d.pruned, wantPruned) {
				t.Errorf("pruned %q, want %q", d.pruned, wantPruned)
			}
			var details, summary bytes.Buffer
			if err := errors.Join(printDetails(&details, []*resourceDiff{d}), printSummary(&summary, []*render.Kind{k}, []*resourceDiff{d})); err != nil {
				t.Fatal(err)
			}
			if kept := regexp.MustCompile(`(?m)^#   keep (.*): stencil prunes nothing while`).FindAllStringSubmatch(details.String(), -1); len(kept) != len(wantKept) {
				t.Errorf("details keep %q, want %q:\n%s", kept, wantKept, details.String())
			} else {
				for i, m := range kept {
					if m[1] != wantKept[i] {
						t.Errorf("details keep %q, want %q", m[1], wantKept[i])
					}
				}
			}
			if !strings.HasSuffix(strings.TrimSpace(summary.String()), fmt.Sprintf(" %d", len(wantPruned))) {
				t.Errorf("summary counts other prunes than %d:\n%s", len(wantPruned), summary.String())
			}
		})
	}
}
