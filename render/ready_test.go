package render_test

import (
	"maps"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// TestNodeReady: a graph node's object is judged by the rules a node that
// waits for it would apply (kstatus, a Job complete, readyWhen), whether
// or not a node waits for it; an object no node rendered has no rules.
func TestNodeReady(t *testing.T) {
	kind, err := loadGraph(t, `graph:
  gate: {readyWhen: ['{{ eq (dig "metadata" "annotations" "open" "" .) "yes" }}']}
  job: {}
  plain: {}
  secret: {readyWhen: ['{{ fail (index .data "token") }}']}
`, map[string]string{
		"gate.yaml":   configMap("gate", ""),
		"job.yaml":    "apiVersion: batch/v1\nkind: Job\nmetadata: {name: migrate}\n",
		"plain.yaml":  configMap("plain", ""),
		"secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: token}\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	object := func(apiVersion, kind, name, node string, fields map[string]any) *unstructured.Unstructured {
		o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind}}
		maps.Copy(o.Object, fields)
		o.SetName(name)
		if node != "" {
			o.SetAnnotations(map[string]string{v1alpha1.AnnotationGraphNode: node})
		}
		return o
	}
	conditions := func(typ string) map[string]any {
		return map[string]any{"conditions": []any{map[string]any{"type": typ, "status": "True"}}}
	}
	tests := []struct {
		name string
		// rendered is the object as rendered (its node annotated); live
		// is the live object as the apply left it.
		rendered, live *unstructured.Unstructured
		// rules: the node declares readyWhen rules.
		rules bool
		// want is in what it says ("" when ready); failed, whether
		// waiting will not help. secret must not appear in it.
		want   string
		failed bool
	}{
		{name: "readyWhen not met", rules: true,
			rendered: object("v1", "ConfigMap", "gate", "gate", nil),
			live:     object("v1", "ConfigMap", "gate", "gate", nil),
			want:     `ConfigMap gate: readyWhen[0] {{ eq (dig "metadata" "annotations" "open" "" .) "yes" }}`},
		{name: "readyWhen met", rules: true,
			rendered: object("v1", "ConfigMap", "gate", "gate", nil),
			live:     object("v1", "ConfigMap", "gate", "", map[string]any{"metadata": map[string]any{"name": "gate", "annotations": map[string]any{"open": "yes"}}})},
		{name: "a Job that runs: kstatus calls it current, the node does not",
			rendered: object("batch/v1", "Job", "migrate", "job", nil),
			live:     object("batch/v1", "Job", "migrate", "job", map[string]any{"status": map[string]any{"active": int64(1), "startTime": "2025-01-01T00:00:00Z"}}),
			want:     "Job migrate to complete (Job in progress"},
		{name: "a complete Job",
			rendered: object("batch/v1", "Job", "migrate", "job", nil),
			live:     object("batch/v1", "Job", "migrate", "job", map[string]any{"status": conditions("Complete")})},
		{name: "a failed Job", failed: true,
			rendered: object("batch/v1", "Job", "migrate", "job", nil),
			live:     object("batch/v1", "Job", "migrate", "job", map[string]any{"status": conditions("Failed")}),
			want:     "Job migrate, which failed"},
		{name: "a node without rules",
			rendered: object("v1", "ConfigMap", "plain", "plain", nil),
			live:     object("v1", "ConfigMap", "plain", "plain", nil)},
		{name: "an object of no node",
			rendered: object("v1", "ConfigMap", "other", "", nil),
			live:     object("v1", "ConfigMap", "other", "", nil)},
		{name: "a failed rule on a Secret quotes none of its data", rules: true,
			rendered: object("v1", "Secret", "token", "secret", nil),
			live:     object("v1", "Secret", "token", "secret", map[string]any{"data": map[string]any{"token": "c2VjcmV0LXZhbHVl"}}),
			want:     "Secret token: readyWhen[0] failed (its message is withheld"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := kind.Graph().HasReadyWhen(tt.rendered); got != tt.rules {
				t.Errorf("HasReadyWhen = %v, want %v", got, tt.rules)
			}
			why, failed := kind.Graph().NodeReady(tt.rendered, tt.live.Object)
			if tt.want == "" && why != "" || !strings.Contains(why, tt.want) || failed != tt.failed {
				t.Errorf("NodeReady = %q, %v; want %q, %v", why, failed, tt.want, tt.failed)
			}
			if strings.Contains(why, "c2VjcmV0LXZhbHVl") {
				t.Errorf("NodeReady quotes a Secret's data: %q", why)
			}
		})
	}
}
