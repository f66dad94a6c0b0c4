package reconciler_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/internal/testing/testkind"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
)

// gatedGadget is the Gadget kind with two nodes: a gate a test opens (by
// annotating it) and a ConfigMap after it with a field another manager can
// take.
func gatedGadget() fstest.MapFS {
	return fstest.MapFS{
		"_kind.yaml": {Data: []byte(`owns:
- {apiVersion: v1, kind: ConfigMap}
graph:
  gate:
    readyWhen: ['{{ eq (dig "metadata" "annotations" "test.stencil.dev/open" "" .) "yes" }}']
  after-gate:
    after: [gate]
`)},
		"gate.yaml": {Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ printf "%s-gate" .Name | quote }}
`)},
		"after-gate.yaml": {Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ printf "%s-after-gate" .Name | quote }}
data:
  color: blue
`)},
	}
}

// leafGadget is the Gadget kind with two nodes nothing waits for: a Job,
// and a ConfigMap with a readyWhen rule a test meets by annotating it.
func leafGadget() fstest.MapFS {
	return fstest.MapFS{
		"_kind.yaml": {Data: []byte(`owns:
- {apiVersion: v1, kind: ConfigMap}
- {apiVersion: batch/v1, kind: Job}
graph:
  flag:
    readyWhen: ['{{ eq (dig "metadata" "annotations" "test.stencil.dev/open" "" .) "yes" }}']
  seed: {}
`)},
		"flag.yaml": {Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ printf "%s-flag" .Name | quote }}
`)},
		"seed.yaml": {Data: []byte(`apiVersion: batch/v1
kind: Job
metadata:
  name: {{ printf "%s-seed" .Name | quote }}
spec:
  template:
    spec:
      restartPolicy: Never
      # Its pod runs once a test labels a node (kwok then completes it).
      nodeSelector: {test.stencil.dev/seeds: {{ .Namespace | quote }}}
      containers:
      - {name: seed, image: busybox}
`)},
	}
}

// gadgetStatus is the Gadget's status once its condition typ has reason.
func gadgetStatus(t *testing.T, ns, name, typ, reason string) *v1alpha1.Status {
	t.Helper()
	g := &testv1alpha1.Gadget{}
	eventually(t, 30*time.Second, name+"'s "+typ+" "+reason, func() error {
		if err := k8s.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, g); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(g.Status.Conditions, typ); c == nil || c.Reason != reason {
			return fmt.Errorf("%s is %+v", typ, c)
		}
		return nil
	})
	return &g.Status.Status
}

// driftNames are the objects status.drift holds.
func driftNames(s *v1alpha1.Status) []string {
	var out []string
	for _, d := range s.Drift {
		out = append(out, d.Name)
	}
	return out
}

func closeGate(t *testing.T, ns, gadget string) {
	t.Helper()
	gate := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: gadget + "-gate"}}
	if err := k8s.Patch(t.Context(), gate, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"test.stencil.dev/open":null}}}`))); err != nil {
		t.Fatal(err)
	}
}

// TestGraphWaitingKeepsDrift: while a node waits, stencil neither checks
// nor corrects its objects, and its status says so: drift reported of them
// stays reported (policy Report), and without any Drifted is Unknown, never
// False with "every field has the value"; once the node renders again, it
// is checked again.
func TestGraphWaitingKeepsDrift(t *testing.T) {
	def := testkind.Gadget()
	def.Templates = gatedGadget()
	startGadgetKind(t, def)
	ns := newGadgetNamespace(t)
	createGadget(t, ns, "report", testv1alpha1.GadgetSpec{DriftPolicy: v1alpha1.DriftReport})
	createGadget(t, ns, "correct", testv1alpha1.GadgetSpec{})
	for _, name := range []string{"report", "correct"} {
		eventually(t, 30*time.Second, name+"'s gate applied", func() error {
			if !exists(t, &corev1.ConfigMap{}, ns, name+"-gate") {
				return fmt.Errorf("%s-gate not applied yet", name)
			}
			return nil
		})
		openGate(t, ns, name)
		gadgetStatus(t, ns, name, v1alpha1.ConditionReady, v1alpha1.ReasonReconciled)
	}
	// Another manager takes a field of report's late node: reported.
	late := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "report-after-gate"}}
	if err := k8s.Patch(t.Context(), late, client.RawPatch(types.MergePatchType, []byte(`{"data":{"color":"red"}}`)), client.FieldOwner("test-editor")); err != nil {
		t.Fatal(err)
	}
	if s := gadgetStatus(t, ns, "report", v1alpha1.ConditionDrifted, v1alpha1.ReasonDriftDetected); !slices.Equal(driftNames(s), []string{"report-after-gate"}) {
		t.Fatalf("status.drift holds %q, want report-after-gate", driftNames(s))
	}

	// The gates close: the late nodes wait, and their objects stay as they are.
	closeGate(t, ns, "report")
	closeGate(t, ns, "correct")
	report := gadgetStatus(t, ns, "report", v1alpha1.ConditionReady, v1alpha1.ReasonWaiting)
	if c := meta.FindStatusCondition(report.Conditions, v1alpha1.ConditionDrifted); c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonDriftDetected {
		t.Errorf("report's node waits, its object's drift is unchanged, and Drifted is %+v; want True %s", c, v1alpha1.ReasonDriftDetected)
	}
	if !slices.Equal(driftNames(report), []string{"report-after-gate"}) {
		t.Errorf("report's node waits, and status.drift holds %q: the drift reported of its object was erased", driftNames(report))
	}
	correct := gadgetStatus(t, ns, "correct", v1alpha1.ConditionReady, v1alpha1.ReasonWaiting)
	if c := meta.FindStatusCondition(correct.Conditions, v1alpha1.ConditionDrifted); c == nil || c.Status != metav1.ConditionUnknown ||
		c.Reason != v1alpha1.ReasonDriftNotChecked || !strings.Contains(c.Message, "ConfigMap correct-after-gate") {
		t.Errorf("correct's node waits, its object is not checked, and Drifted is %+v; want Unknown %s naming it", c, v1alpha1.ReasonDriftNotChecked)
	}
	if kept := (&corev1.ConfigMap{}); !exists(t, kept, ns, "report-after-gate") || kept.Data["color"] != "red" {
		t.Errorf("report-after-gate holds %v while its node waits; want it kept as it was", kept.Data)
	}

	// The gates open again: the nodes render, and their objects are checked.
	openGate(t, ns, "correct")
	gadgetStatus(t, ns, "correct", v1alpha1.ConditionReady, v1alpha1.ReasonReconciled)
	s := gadgetStatus(t, ns, "correct", v1alpha1.ConditionDrifted, v1alpha1.ReasonInSync)
	if c := meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionDrifted); c.Status != metav1.ConditionFalse {
		t.Errorf("correct's Drifted is %+v once every object is checked; want False", c)
	}
	openGate(t, ns, "report")
	gadgetStatus(t, ns, "report", v1alpha1.ConditionReady, v1alpha1.ReasonReconciled)
	if s := gadgetStatus(t, ns, "report", v1alpha1.ConditionDrifted, v1alpha1.ReasonDriftDetected); !slices.Equal(driftNames(s), []string{"report-after-gate"}) {
		t.Errorf("status.drift holds %q once report's node renders again, want report-after-gate", driftNames(s))
	}
}

// labelNode labels a node of the cluster with key=value until the test ends.
func labelNode(t *testing.T, key, value string) {
	t.Helper()
	nodes := &corev1.NodeList{}
	if err := k8s.List(t.Context(), nodes); err != nil || len(nodes.Items) == 0 {
		t.Fatalf("listing nodes: %v (%d)", err, len(nodes.Items))
	}
	node := &nodes.Items[0]
	patch := func(ctx context.Context, v any) error {
		data, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{key: v}}})
		if err != nil {
			return err
		}
		return k8s.Patch(ctx, node, client.RawPatch(types.MergePatchType, data))
	}
	if err := patch(t.Context(), value); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := patch(context.WithoutCancel(t.Context()), nil); err != nil {
			t.Errorf("removing the label %s from node %s: %v", key, node.Name, err)
		}
	})
}

// TestGraphReadyJudgesLeafNodes: a graph kind's resource is Ready only when
// the objects of every node pass their node's rules, those of nodes nothing
// waits for too: a Job that runs (which kstatus calls current) is not
// complete, and an object whose readyWhen rule does not hold is not ready.
func TestGraphReadyJudgesLeafNodes(t *testing.T) {
	def := testkind.Gadget()
	def.Templates = leafGadget()
	startGadgetKind(t, def)
	ns := newGadgetNamespace(t)
	createGadget(t, ns, "leaf", testv1alpha1.GadgetSpec{})
	// The Job's pod waits for a node: the Job runs (started, one pod
	// active) and does not complete.
	eventually(t, 30*time.Second, "the Gadget not Ready while its Job runs and its flag is down", func() error {
		return errors.Join(
			gadgetCondition(t, ns, "leaf", v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonProgressing,
				"Job leaf-seed to complete (Job in progress", "ConfigMap leaf-flag: readyWhen[0]"),
			gadgetCondition(t, ns, "leaf", v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonProgressing))
	})
	labelNode(t, "test.stencil.dev/seeds", ns)
	eventually(t, 60*time.Second, "the Gadget waiting for its flag alone once its Job completed", func() error {
		return gadgetCondition(t, ns, "leaf", v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonProgressing, "but 1 not ready yet: ConfigMap leaf-flag: readyWhen[0]")
	})
	flag := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "leaf-flag"}}
	if err := k8s.Patch(t.Context(), flag, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"test.stencil.dev/open":"yes"}}}`))); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the Gadget Ready once its Job completed and its flag is up", func() error {
		return gadgetCondition(t, ns, "leaf", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReconciled)
	})
}
