package render_test

import (
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
	"github.com/stencil-operator/stencil/render"
)

// TestHashLeavesOutItsOwnAnnotation: an object hashes the same with or
// without its hash annotation, any other change changes the hash, and the
// object hashed is left as it was.
func TestHashLeavesOutItsOwnAnnotation(t *testing.T) {
	object := func(annotations map[string]string) *unstructured.Unstructured {
		o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"k": "v"}}}
		o.SetName("cm")
		if annotations != nil {
			o.SetAnnotations(annotations)
		}
		return o
	}
	hash := func(o *unstructured.Unstructured) string {
		t.Helper()
		h, err := render.Hash(o)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	plain := hash(object(nil))
	tests := []struct {
		name        string
		annotations map[string]string
		same        bool
	}{
		{"only the hash annotation", map[string]string{v1alpha1.AnnotationDesiredHash: "old"}, true},
		{"another annotation", map[string]string{"team": "a"}, false},
		{"another annotation and the hash", map[string]string{"team": "a", v1alpha1.AnnotationDesiredHash: "old"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := object(tt.annotations)
			if got := hash(o); (got == plain) != tt.same {
				t.Errorf("hash %s, without annotations %s; want the same: %v", got, plain, tt.same)
			}
			if got := o.GetAnnotations(); len(got) != len(tt.annotations) {
				t.Errorf("annotations changed to %v", got)
			}
		})
	}
	withOther := object(map[string]string{"team": "a"})
	withBoth := object(map[string]string{"team": "a", v1alpha1.AnnotationDesiredHash: "old"})
	if hash(withOther) != hash(withBoth) {
		t.Error("the hash annotation changes the hash of an object with other annotations")
	}
}

// TestStampStripsControlKeys: every key that steers stencil (config/policy
// lists them) that a template writes, in an object's metadata or in the
// label maps the cluster's controllers copy into the objects they create,
// is gone from the rendered object, or holds stencil's own value: what
// stencil sets itself (the owner UID and shard labels, the owner
// annotation; ownerLabels in a pod template) stays, whatever the template
// wrote. A template that copies the resource's labels renders when
// sharding has claimed the resource.
func TestStampStripsControlKeys(t *testing.T) {
	const podSpec = `{containers: [{name: c, image: nginx}]}`
	tests := []struct {
		name string
		// template is the kind's one template, x.yaml; the resource is
		// Widget team-a/demo, UID uid-1, labelled stencil.dev/shard: a and
		// stencil.dev/claimed-by: stencil-a.
		template string
		// at is the label or annotation map to look at in the rendered
		// object, a dotted path (a list's element as field[i]).
		at string
		// want are keys that map holds, with their values.
		want map[string]string
		// gone are keys that map does not hold.
		gone []string
	}{
		{
			name:     "no control key",
			template: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, labels: {app: a}}}`,
			at:       "metadata.labels",
			want:     map[string]string{"app": "a", v1alpha1.LabelOwnerUID: "uid-1", v1alpha1.LabelShard: "a", v1alpha1.LabelManagedBy: v1alpha1.ManagedByStencil},
			gone:     []string{v1alpha1.LabelDecorator, v1alpha1.LabelClaim},
		},
		{
			name:     "another resource's owner UID",
			template: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, labels: {stencil.dev/owner-uid: other}}}`,
			at:       "metadata.labels",
			want:     map[string]string{v1alpha1.LabelOwnerUID: "uid-1"},
		},
		{
			name:     "the resource's own owner UID and shard",
			template: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, labels: {stencil.dev/owner-uid: uid-1, stencil.dev/shard: a}}}`,
			at:       "metadata.labels",
			want:     map[string]string{v1alpha1.LabelOwnerUID: "uid-1", v1alpha1.LabelShard: "a"},
		},
		{
			name:     "another shard",
			template: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, labels: {stencil.dev/shard: b}}}`,
			at:       "metadata.labels",
			want:     map[string]string{v1alpha1.LabelShard: "a"},
		},
		{
			name:     "a decorator's label",
			template: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, labels: {app: a, stencil.dev/decorator: namespace-defaults}}}`,
			at:       "metadata.labels",
			want:     map[string]string{"app": "a"},
			gone:     []string{v1alpha1.LabelDecorator},
		},
		{
			name:     "a claim",
			template: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, labels: {stencil.dev/claimed-by: b}}}`,
			at:       "metadata.labels",
			gone:     []string{v1alpha1.LabelClaim},
		},
		{
			name:     "the resource's own labels, its claim among them",
			template: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, labels: {{ .Labels | toJson }}}}`,
			at:       "metadata.labels",
			want:     map[string]string{"app": "demo", v1alpha1.LabelShard: "a"},
			gone:     []string{v1alpha1.LabelClaim},
		},
		{
			name:     "another resource's owner annotation",
			template: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, annotations: {stencil.dev/owner: Widget.test.stencil.dev/team-b/web}}}`,
			at:       "metadata.annotations",
			want:     map[string]string{v1alpha1.AnnotationOwner: "Widget.test.stencil.dev/team-a/demo"},
		},
		{
			name:     "a prune-pending mark",
			template: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, annotations: {team: a, stencil.dev/prune-pending: "true"}}}`,
			at:       "metadata.annotations",
			want:     map[string]string{"team": "a"},
			gone:     []string{v1alpha1.AnnotationPrunePending},
		},
		{
			name:     "a claim's Lease",
			template: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, annotations: {stencil.dev/claimed-under-lease: stencil-b}}}`,
			at:       "metadata.annotations",
			gone:     []string{v1alpha1.AnnotationClaimLease},
		},
		{
			name:     "an orphaning mark",
			template: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, annotations: {stencil.dev/orphaning: "true"}}}`,
			at:       "metadata.annotations",
			gone:     []string{v1alpha1.AnnotationOrphaning},
		},
		{
			name: "ownerLabels in a pod template",
			template: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: a}, spec: {selector: {matchLabels: {app: a}},
  template: {metadata: {labels: {{ ownerLabels . | toJson }}}, spec: ` + podSpec + `}}}`,
			at:   "spec.template.metadata.labels",
			want: map[string]string{v1alpha1.LabelOwnerUID: "uid-1", v1alpha1.LabelManagedBy: v1alpha1.ManagedByStencil},
		},
		{
			name: "another resource's owner UID in a pod template",
			template: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: a}, spec: {selector: {matchLabels: {app: a}},
  template: {metadata: {labels: {app: a, stencil.dev/owner-uid: other}}, spec: ` + podSpec + `}}}`,
			at:   "spec.template.metadata.labels",
			want: map[string]string{"app": "a"},
			gone: []string{v1alpha1.LabelOwnerUID},
		},
		{
			name: "the resource's shard in a pod template",
			template: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: a}, spec: {selector: {matchLabels: {app: a}},
  template: {metadata: {labels: {app: a, stencil.dev/shard: a}}, spec: ` + podSpec + `}}}`,
			at:   "spec.template.metadata.labels",
			want: map[string]string{"app": "a"},
			gone: []string{v1alpha1.LabelShard},
		},
		{
			name: "the resource's own labels in a pod template",
			template: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: a}, spec: {selector: {matchLabels: {app: demo}},
  template: {metadata: {labels: {{ .Labels | toJson }}}, spec: ` + podSpec + `}}}`,
			at:   "spec.template.metadata.labels",
			want: map[string]string{"app": "demo"},
			gone: []string{v1alpha1.LabelShard, v1alpha1.LabelClaim},
		},
		{
			name: "a decorator's label in a job template",
			template: `{apiVersion: batch/v1, kind: CronJob, metadata: {name: a}, spec: {schedule: "@daily",
  jobTemplate: {metadata: {labels: {stencil.dev/decorator: d}}, spec: {template: {spec: ` + podSpec + `}}}}}`,
			at:   "spec.jobTemplate.metadata.labels",
			gone: []string{v1alpha1.LabelDecorator},
		},
		{
			name: "another resource's owner UID in a job's pod template",
			template: `{apiVersion: batch/v1, kind: CronJob, metadata: {name: a}, spec: {schedule: "@daily",
  jobTemplate: {spec: {template: {metadata: {labels: {stencil.dev/owner-uid: other}}, spec: ` + podSpec + `}}}}}`,
			at:   "spec.jobTemplate.spec.template.metadata.labels",
			gone: []string{v1alpha1.LabelOwnerUID},
		},
		{
			name: "another resource's owner UID in a claim template",
			template: `{apiVersion: apps/v1, kind: StatefulSet, metadata: {name: a}, spec: {serviceName: a, selector: {matchLabels: {app: a}},
  template: {metadata: {labels: {app: a}}, spec: ` + podSpec + `},
  volumeClaimTemplates: [{metadata: {name: data}}, {metadata: {name: logs, labels: {stencil.dev/owner-uid: other}}}]}}`,
			at:   "spec.volumeClaimTemplates[1].metadata.labels",
			gone: []string{v1alpha1.LabelOwnerUID},
		},
		{
			name: "a claim in a pod's ephemeral volume",
			template: `{apiVersion: v1, kind: Pod, metadata: {name: a}, spec: {containers: [{name: c, image: nginx}],
  volumes: [{name: data, ephemeral: {volumeClaimTemplate: {metadata: {labels: {stencil.dev/claimed-by: b}}, spec: {}}}}]}}`,
			at:   "spec.volumes[0].ephemeral.volumeClaimTemplate.metadata.labels",
			gone: []string{v1alpha1.LabelClaim},
		},
		{
			name: "another resource's owner UID in a pod template's ephemeral volume",
			template: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: a}, spec: {selector: {matchLabels: {app: a}},
  template: {metadata: {labels: {app: a}}, spec: {containers: [{name: c, image: nginx}],
    volumes: [{name: data, ephemeral: {volumeClaimTemplate: {metadata: {labels: {stencil.dev/owner-uid: other}}, spec: {}}}}]}}}}`,
			at:   "spec.template.spec.volumes[0].ephemeral.volumeClaimTemplate.metadata.labels",
			gone: []string{v1alpha1.LabelOwnerUID},
		},
		{
			name: "another resource's owner UID in a job's pod template's ephemeral volume",
			template: `{apiVersion: batch/v1, kind: CronJob, metadata: {name: a}, spec: {schedule: "@daily",
  jobTemplate: {spec: {template: {spec: {containers: [{name: c, image: nginx}],
    volumes: [{name: data, ephemeral: {volumeClaimTemplate: {metadata: {labels: {stencil.dev/owner-uid: other}}, spec: {}}}}]}}}}}}`,
			at:   "spec.jobTemplate.spec.template.spec.volumes[0].ephemeral.volumeClaimTemplate.metadata.labels",
			gone: []string{v1alpha1.LabelOwnerUID},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kind, err := render.Load(render.Definition{
				GroupVersionKind: testv1alpha1.GroupVersion.WithKind("Widget"),
				New:              func() v1alpha1.Object { return &testv1alpha1.Widget{} },
				Templates: fstest.MapFS{
					"_kind.yaml": {Data: []byte(`owns:
- {apiVersion: v1, kind: ConfigMap}
- {apiVersion: v1, kind: Pod}
- {apiVersion: apps/v1, kind: Deployment}
- {apiVersion: apps/v1, kind: StatefulSet}
- {apiVersion: batch/v1, kind: CronJob}
`)},
					"x.yaml": {Data: []byte(tt.template)},
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			w := &testv1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "team-a", UID: "uid-1",
				Labels: map[string]string{"app": "demo", v1alpha1.LabelShard: "a", v1alpha1.LabelClaim: "stencil-a"}}}
			objs, err := kind.Render(w)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			checkKeys(t, objs[0], tt.at, tt.want, tt.gone)
		})
	}
}

// TestDecoratorStripsControlKeys: a decorator's child carries its
// decorator's label and its parent's owner UID, not those its template
// writes, and what a decorator sets on its parent carries no key that
// steers stencil.
func TestDecoratorStripsControlKeys(t *testing.T) {
	tests := []struct {
		name string
		// template is the decorator's one template, x.yaml; its parent is
		// Namespace team-a, UID ns-uid.
		template string
		// parent: look at what the decorator sets on its parent, not at
		// its one child.
		parent bool
		// at is the label or annotation map to look at, a dotted path.
		at string
		// want are keys that map holds, with their values.
		want map[string]string
		// gone are keys that map does not hold.
		gone []string
	}{
		{
			name:     "a child",
			template: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, labels: {app: a}}}`,
			at:       "metadata.labels",
			want:     map[string]string{"app": "a", v1alpha1.LabelDecorator: "defaults", v1alpha1.LabelOwnerUID: "ns-uid"},
		},
		{
			name:     "a child with another decorator's label",
			template: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, labels: {stencil.dev/decorator: other}}}`,
			at:       "metadata.labels",
			want:     map[string]string{v1alpha1.LabelDecorator: "defaults"},
		},
		{
			name:     "a child with another owner UID",
			template: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, labels: {stencil.dev/owner-uid: other}}}`,
			at:       "metadata.labels",
			want:     map[string]string{v1alpha1.LabelOwnerUID: "ns-uid"},
		},
		{
			name:     "a label on the parent",
			template: `{apiVersion: v1, kind: Namespace, metadata: {name: team-a, labels: {team: a}}}`,
			parent:   true,
			at:       "metadata.labels",
			want:     map[string]string{"team": "a"},
		},
		{
			name:     "a shard label on the parent",
			template: `{apiVersion: v1, kind: Namespace, metadata: {name: team-a, labels: {team: a, stencil.dev/shard: b}}}`,
			parent:   true,
			at:       "metadata.labels",
			want:     map[string]string{"team": "a"},
			gone:     []string{v1alpha1.LabelShard},
		},
		{
			name:     "an owner annotation on the parent",
			template: `{apiVersion: v1, kind: Namespace, metadata: {name: team-a, annotations: {stencil.dev/owner: Widget.test.stencil.dev/team-b/web}}}`,
			parent:   true,
			at:       "metadata.annotations",
			gone:     []string{v1alpha1.AnnotationOwner},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := render.LoadDecorator("defaults", fstest.MapFS{
				"_decorator.yaml": {Data: []byte("decorates: {apiVersion: v1, kind: Namespace}\nowns:\n- {apiVersion: v1, kind: ConfigMap}\n")},
				"x.yaml":          {Data: []byte(tt.template)},
			})
			if err != nil {
				t.Fatal(err)
			}
			parent := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "team-a", "uid": "ns-uid"}}}
			patch, children, err := d.Render(parent, nil)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			got := patch
			if !tt.parent {
				if len(children) != 1 {
					t.Fatalf("%d children, want 1", len(children))
				}
				got = children[0]
			}
			if got == nil {
				t.Fatal("no patch of the parent")
			}
			checkKeys(t, got, tt.at, tt.want, tt.gone)
		})
	}
}

// checkKeys checks that the string map at path in o (a dotted path, a
// list's element as field[i]) holds want and none of gone.
func checkKeys(t *testing.T, o *unstructured.Unstructured, path string, want map[string]string, gone []string) {
	t.Helper()
	var at any = o.Object
	for field := range strings.SplitSeq(path, ".") {
		index := -1
		if name, i, ok := strings.Cut(field, "["); ok {
			field = name
			var err error
			if index, err = strconv.Atoi(strings.TrimSuffix(i, "]")); err != nil {
				t.Fatalf("path %s: %v", path, err)
			}
		}
		m, _ := at.(map[string]any)
		at = m[field]
		if index >= 0 {
			list, _ := at.([]any)
			if index >= len(list) {
				t.Fatalf("%s: no %s in %v", o.GetName(), path, o.Object)
			}
			at = list[index]
		}
	}
	m, ok := at.(map[string]any)
	if !ok {
		t.Fatalf("%s: no map at %s in %v", o.GetName(), path, o.Object)
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s %s = %v, want %q (%s: %v)", path, k, m[k], v, path, m)
		}
	}
	for _, k := range gone {
		if v, set := m[k]; set {
			t.Errorf("%s %s = %v, want it gone (%s: %v)", path, k, v, path, m)
		}
	}
}
