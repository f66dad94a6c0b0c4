package chartimport

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestConvertSubchartsAndHooks: an aliased subchart goes by its alias (its
// values, its condition, its files), a subchart's hook is ordered under its
// own name, and a custom resource's type (a ServiceMonitor) is declared
// optional: the kind runs where its CRD is not installed.
func TestConvertSubchartsAndHooks(t *testing.T) {
	c, err := newChart(map[string][]byte{
		"Chart.yaml":                  []byte("name: app\nversion: 1.0.0\ndependencies:\n- {name: db, alias: primary, condition: primary.enabled}\n"),
		"values.yaml":                 []byte("primary: {enabled: true, size: 2}\nmonitor: false\n"),
		"templates/monitor.yaml":      []byte("{{ if .Values.monitor }}\napiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: m}\n{{ end }}\n"),
		"templates/cm.yaml":           []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\n"),
		"charts/db/Chart.yaml":        []byte("name: db\nversion: 0.1.0\n"),
		"charts/db/values.yaml":       []byte("size: 1\n"),
		"charts/db/templates/cm.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: '{{ .Chart.Name }}-{{ .Values.size }}'}\n"),
		"charts/db/templates/job.yaml": []byte("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: db-init\n  annotations: {\"helm.sh/hook\": post-install}\n" +
			"spec: {template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}}\n"),
	})
	if err != nil {
		t.Fatal(err)
	}
	f, err := Convert(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"_charts/primary/_chart.yaml", "charts--primary--cm.yaml", "charts--primary--job.yaml"} {
		if f.Files[name] == nil {
			t.Errorf("no %s in the kind's folder", name)
		}
	}
	if f.Hooks["charts--primary--job.yaml"] != hookAfter {
		t.Errorf("hooks %v: the subchart's post-install Job is not ordered after the rest", f.Hooks)
	}
	gvk := schema.GroupVersionKind{Group: "apps.example.com", Version: "v1alpha1", Kind: "App"}
	decl, err := Declare(gvk, f, []map[string]any{{}, {"monitor": true}, {"primary": map[string]any{"enabled": false}}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(decl), "kind: ServiceMonitor\n  optional: true") {
		t.Errorf("_kind.yaml does not declare the ServiceMonitor optional:\n%s", decl)
	}
	k, err := Kind(gvk, f, decl)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Render(k, "rel", "ns", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range objs {
		names = append(names, o.GetName())
	}
	slices.Sort(names)
	if got := strings.Join(names, ","); got != "app,db-init,primary-2" {
		t.Errorf("objects %s, want app, db-init and primary-2 (the aliased subchart's name and its values under the alias)", got)
	}
	if objs, err = Render(k, "rel", "ns", map[string]any{"primary": map[string]any{"enabled": false}}); err != nil || len(objs) != 1 {
		t.Errorf("the alias's condition false: %d objects (%v), want the chart's one", len(objs), err)
	}
}
