package reconciler_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1 "github.com/stencil-operator/stencil/api/operator/v1"
	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/internal/testing/testutil"
	"github.com/stencil-operator/stencil/internal/testing/testutil/testop"
	"github.com/stencil-operator/stencil/render"
)

// hostileTemplates is a MyWeb kind whose templates feed a count from the
// spec (spec.pageContentHtml, "<mode>:<count>") to what each limit bounds:
// repeat (bytes), a range over an integer (time), a range that renders
// objects (objects), and the status template (status bytes).
var hostileTemplates = fstest.MapFS{
	"_kind.yaml": {Data: []byte("owns: [{apiVersion: v1, kind: ConfigMap}]\n")},
	"configmap.yaml": {Data: []byte(`{{- $p := splitList ":" .Spec.PageContentHtml }}{{ $mode := index $p 0 }}{{ $n := atoi (index $p 1) -}}
apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Name | quote }}}
data:
  page: {{ .Spec.PageContentHtml | quote }}
{{- if eq $mode "bytes" }}
  big: {{ repeat $n "x" | quote }}
{{- end }}
{{- if eq $mode "time" }}{{ range $i := $n }}{{ end }}{{ end }}
{{- if eq $mode "objects" }}{{ range $i := until $n }}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: "{{ $.Name }}-{{ $i }}"}
{{- end }}{{ end }}
`)},
	"_status.yaml": {Data: []byte(`{{- $p := splitList ":" .Object.Spec.PageContentHtml }}{{ if eq (index $p 0) "status" }}page: {{ repeat (atoi (index $p 1)) "x" | quote }}{{ end }}
`)},
}

// TestHostileSpecsDoNotStallOthers: a custom resource whose spec makes its
// render exceed each limit is Stalled with reason LimitExceeded, naming the
// limit, with nothing applied; ordinary resources of the same kind, created
// after them, become Ready meanwhile.
func TestHostileSpecsDoNotStallOthers(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, operatorv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(cluster.Get(t).Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	crd, err := os.ReadFile("../config/crd/bases/operator.k8s-summit.org_mywebs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := testutil.InstallCRDs(t.Context(), c, fstest.MapFS{"myweb.yaml": {Data: crd}}); err != nil {
		t.Fatal(err)
	}
	kind, err := render.Load(render.Definition{
		GroupVersionKind: operatorv1.GroupVersion.WithKind("MyWeb"),
		New:              func() v1alpha1.Object { return &operatorv1.MyWeb{} },
		Templates:        hostileTemplates,
	})
	if err != nil {
		t.Fatal(err)
	}
	limits := render.Limits{Steps: 200_000, Time: 10 * time.Second, Bytes: 1 << 20, Objects: 20, StatusBytes: 4 << 10}
	if err := testop.StartOperator(t.Context(), cluster.Get(t).Config, scheme, []*render.Kind{kind.WithLimits(limits)}, nil); err != nil {
		t.Fatal(err)
	}
	ns := newNamespace(t)
	t.Cleanup(func() {
		_ = c.DeleteAllOf(t.Context(), &operatorv1.MyWeb{}, client.InNamespace(ns))
	})
	hostile := map[string]string{
		"bytes":   "rendered bytes",
		"time":    "render steps",
		"objects": "rendered objects",
		"status":  "status bytes",
	}
	counts := map[string]string{"bytes": "100000000", "time": "1000000000000000", "objects": "21", "status": "100000"}
	for mode := range hostile {
		create(t, c, ns, "hostile-"+mode, mode+":"+counts[mode])
	}
	// As many more over the time limit as the operator has workers (4 in
	// tests): without the limit, they would hold every worker for ever.
	for i := range 4 {
		create(t, c, ns, fmt.Sprintf("hostile-time-%d", i), "time:"+counts["time"])
	}
	for i := range 3 {
		create(t, c, ns, fmt.Sprintf("ordinary-%d", i), "ok:3")
	}
	start := time.Now()
	for i := range 3 {
		eventually(t, 30*time.Second, "an ordinary MyWeb Ready", func() error {
			return mywebCondition(t, c, ns, fmt.Sprintf("ordinary-%d", i), v1alpha1.ConditionReady, v1alpha1.ReasonReconciled, "")
		})
	}
	t.Logf("the ordinary MyWebs were Ready %s after the hostile ones were created", time.Since(start).Round(time.Millisecond))
	for mode, limit := range hostile {
		if mode == "status" {
			// The status template runs after the apply: the objects are
			// applied, Ready says the status is over its limit.
			eventually(t, 30*time.Second, "MyWeb hostile-status's status over its limit", func() error {
				return mywebConditionStatus(t, c, ns, "hostile-status", v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonStatusTemplateFailed, "exceeded its limit on "+limit)
			})
			continue
		}
		eventually(t, 30*time.Second, "MyWeb hostile-"+mode+" Stalled", func() error {
			return mywebCondition(t, c, ns, "hostile-"+mode, v1alpha1.ConditionStalled, v1alpha1.ReasonLimitExceeded, "exceeded its limit on "+limit)
		})
		err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "hostile-" + mode}, &corev1.ConfigMap{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("hostile-%s: its ConfigMap was applied (%v): nothing may be applied after a render over a limit", mode, err)
		}
	}
}

func create(t *testing.T, c client.Client, ns, name, page string) {
	t.Helper()
	web := &operatorv1.MyWeb{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	web.Spec.Image, web.Spec.NodePortNumber, web.Spec.PageContentHtml = "nginx", 30100, page
	if err := c.Create(t.Context(), web); err != nil {
		t.Fatal(err)
	}
}

// mywebCondition is nil when the MyWeb's condition of type is True with
// reason, and its message holds message.
func mywebCondition(t *testing.T, c client.Client, ns, name, typ, reason, message string) error {
	t.Helper()
	return mywebConditionStatus(t, c, ns, name, typ, metav1.ConditionTrue, reason, message)
}

// mywebConditionStatus is mywebCondition for a condition of status.
func mywebConditionStatus(t *testing.T, c client.Client, ns, name, typ string, status metav1.ConditionStatus, reason, message string) error {
	t.Helper()
	web := &operatorv1.MyWeb{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, web); err != nil {
		return err
	}
	cond := meta.FindStatusCondition(web.Status.Conditions, typ)
	if cond == nil || cond.Status != status || cond.Reason != reason || !strings.Contains(cond.Message, message) {
		return fmt.Errorf("%s: %s is %+v", name, typ, cond)
	}
	return nil
}
