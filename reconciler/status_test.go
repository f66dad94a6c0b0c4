package reconciler

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
	"github.com/stencil-operator/stencil/reconciler/engine"
)

func TestComputeStatus(t *testing.T) {
	cm := &unstructured.Unstructured{}
	cm.SetAPIVersion("v1")
	cm.SetKind("ConfigMap")
	cm.SetNamespace("ns")
	cm.SetName("a")
	drift := []v1alpha1.ObjectDrift{{APIVersion: "v1", Kind: "ConfigMap", Name: "a", Fields: []v1alpha1.FieldDrift{{Path: ".data.x"}}}}
	reverted := []v1alpha1.ObjectDrift{{APIVersion: "v1", Kind: "ConfigMap", Name: "a", Fields: []v1alpha1.FieldDrift{{Path: ".data.x"}}, Reverted: true}}
	fights := []engine.DeferredCorrection{{Drift: drift[0]}}
	oldInventory := []v1alpha1.InventoryEntry{{APIVersion: "v1", Kind: "Service", Namespace: "ns", Name: "old"}}
	corrected := metav1.Condition{Type: v1alpha1.ConditionDrifted, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonDriftCorrected, Message: "earlier"}

	fail := func(reason string, stalled bool, msg string) *failure {
		return &failure{reason: reason, stalled: stalled, err: errors.New(msg)}
	}
	pruned := []v1alpha1.InventoryEntry{oldInventory[0]}
	progressing := []engine.ObjectHealth{{Object: "Deployment web", Message: "Available: 0/1"}}
	failedHealth := []engine.ObjectHealth{{Object: "Deployment web", Message: "Progress deadline exceeded", Failed: true}}

	tests := []struct {
		name string
		// before is the status as stored.
		before v1alpha1.Status
		// res is what the reconcile saw and did.
		res result
		// policy is the resource's drift policy.
		policy v1alpha1.DriftPolicy
		// wantReady is the Ready condition's reason.
		wantReady string
		// wantDrifted is the Drifted condition's reason; "" means none.
		wantDrifted string
		// wantProgress is Stalled or Reconciling (the one that is True);
		// "" means neither.
		wantProgress string
		// wantObserved is status.observedGeneration.
		wantObserved int64
		// wantInventory is the number of entries in status.inventory.
		wantInventory int
		// wantDrift is the number of objects in status.drift.
		wantDrift int
	}{
		{
			name:          "success",
			before:        v1alpha1.Status{},
			res:           result{generation: 2, desired: objs(cm)},
			policy:        v1alpha1.DriftCorrect,
			wantReady:     v1alpha1.ReasonReconciled,
			wantDrifted:   v1alpha1.ReasonInSync,
			wantProgress:  "",
			wantObserved:  2,
			wantInventory: 1,
			wantDrift:     0,
		},
		{
			name:          "render failure keeps generation and inventory",
			before:        v1alpha1.Status{ObservedGeneration: 1, Inventory: oldInventory},
			res:           result{generation: 2, failure: fail(v1alpha1.ReasonRenderFailed, true, "x.yaml:1: boom")},
			policy:        v1alpha1.DriftCorrect,
			wantReady:     v1alpha1.ReasonRenderFailed,
			wantDrifted:   "",
			wantProgress:  v1alpha1.ConditionStalled,
			wantObserved:  1,
			wantInventory: 1,
			wantDrift:     0,
		},
		{
			name:          "apply failure adds what was applied",
			before:        v1alpha1.Status{Inventory: oldInventory},
			res:           result{generation: 2, applied: objs(cm), failure: fail(v1alpha1.ReasonApplyFailed, false, "conflict")},
			policy:        v1alpha1.DriftCorrect,
			wantReady:     v1alpha1.ReasonApplyFailed,
			wantDrifted:   "",
			wantProgress:  v1alpha1.ConditionReconciling,
			wantObserved:  0,
			wantInventory: 2,
			wantDrift:     0,
		},
		{
			name:          "finalizer failure claims nothing",
			before:        v1alpha1.Status{ObservedGeneration: 1},
			res:           result{generation: 2, desired: objs(cm), failure: fail(v1alpha1.ReasonFinalizerFailed, false, "adding finalizer: forbidden")},
			policy:        v1alpha1.DriftCorrect,
			wantReady:     v1alpha1.ReasonFinalizerFailed,
			wantDrifted:   "",
			wantProgress:  v1alpha1.ConditionReconciling,
			wantObserved:  1,
			wantInventory: 0,
			wantDrift:     0,
		},
		{
			name:          "panic claims nothing",
			before:        v1alpha1.Status{},
			res:           result{generation: 1, desired: objs(cm), failure: fail(v1alpha1.ReasonReconcilePanicked, false, "the reconcile panicked: boom")},
			policy:        v1alpha1.DriftCorrect,
			wantReady:     v1alpha1.ReasonReconcilePanicked,
			wantDrifted:   "",
			wantProgress:  v1alpha1.ConditionReconciling,
			wantObserved:  0,
			wantInventory: 0,
			wantDrift:     0,
		},
		{
			name:          "ownership conflict stalls",
			before:        v1alpha1.Status{},
			res:           result{generation: 1, desired: objs(cm), failure: fail(v1alpha1.ReasonOwnershipConflict, true, "ConfigMap a is not ours")},
			policy:        v1alpha1.DriftCorrect,
			wantReady:     v1alpha1.ReasonOwnershipConflict,
			wantDrifted:   "",
			wantProgress:  v1alpha1.ConditionStalled,
			wantObserved:  0,
			wantInventory: 0,
			wantDrift:     0,
		},
		{
			name:          "prune failure drops what was pruned",
			before:        v1alpha1.Status{Inventory: oldInventory},
			res:           result{generation: 1, desired: objs(cm), pruned: pruned, failure: fail(v1alpha1.ReasonPruneFailed, false, "forbidden")},
			policy:        v1alpha1.DriftCorrect,
			wantReady:     v1alpha1.ReasonPruneFailed,
			wantDrifted:   "",
			wantProgress:  v1alpha1.ConditionReconciling,
			wantObserved:  0,
			wantInventory: 0,
			wantDrift:     0,
		},
		{
			name:          "empty render",
			before:        v1alpha1.Status{Inventory: oldInventory},
			res:           result{generation: 2, failure: fail(v1alpha1.ReasonEmptyRender, true, "empty")},
			policy:        v1alpha1.DriftCorrect,
			wantReady:     v1alpha1.ReasonEmptyRender,
			wantDrifted:   "",
			wantProgress:  v1alpha1.ConditionStalled,
			wantObserved:  0,
			wantInventory: 1,
			wantDrift:     0,
		},
		{
			name:          "success clears Stalled",
			before:        v1alpha1.Status{Conditions: []metav1.Condition{{Type: v1alpha1.ConditionStalled, Status: metav1.ConditionTrue, Reason: "x"}}},
			res:           result{generation: 2, desired: objs(cm)},
			policy:        v1alpha1.DriftCorrect,
			wantReady:     v1alpha1.ReasonReconciled,
			wantDrifted:   v1alpha1.ReasonInSync,
			wantProgress:  "",
			wantObserved:  2,
			wantInventory: 1,
			wantDrift:     0,
		},
		{
			name:          "report drift",
			before:        v1alpha1.Status{},
			res:           result{generation: 1, desired: objs(cm), drift: drift},
			policy:        v1alpha1.DriftReport,
			wantReady:     v1alpha1.ReasonReconciled,
			wantDrifted:   v1alpha1.ReasonDriftDetected,
			wantProgress:  "",
			wantObserved:  1,
			wantInventory: 1,
			wantDrift:     1,
		},
		{
			name:          "report clears drift once gone",
			before:        v1alpha1.Status{Drift: drift},
			res:           result{generation: 1, desired: objs(cm)},
			policy:        v1alpha1.DriftReport,
			wantReady:     v1alpha1.ReasonReconciled,
			wantDrifted:   v1alpha1.ReasonInSync,
			wantProgress:  "",
			wantObserved:  1,
			wantInventory: 1,
			wantDrift:     0,
		},
		{
			name:          "correct records reverted drift",
			before:        v1alpha1.Status{},
			res:           result{generation: 1, desired: objs(cm), drift: reverted},
			policy:        v1alpha1.DriftCorrect,
			wantReady:     v1alpha1.ReasonReconciled,
			wantDrifted:   v1alpha1.ReasonDriftCorrected,
			wantProgress:  "",
			wantObserved:  1,
			wantInventory: 1,
			wantDrift:     1,
		},
		{
			name:          "correct reports drift it leaves (create only)",
			before:        v1alpha1.Status{},
			res:           result{generation: 1, desired: objs(cm), drift: drift},
			policy:        v1alpha1.DriftCorrect,
			wantReady:     v1alpha1.ReasonReconciled,
			wantDrifted:   v1alpha1.ReasonDriftDetected,
			wantProgress:  "",
			wantObserved:  1,
			wantInventory: 1,
			wantDrift:     1,
		},
		{
			name:          "a fight",
			before:        v1alpha1.Status{},
			res:           result{generation: 1, desired: objs(cm), drift: drift, fights: fights},
			policy:        v1alpha1.DriftCorrect,
			wantReady:     v1alpha1.ReasonReconciled,
			wantDrifted:   v1alpha1.ReasonFieldFight,
			wantProgress:  "",
			wantObserved:  1,
			wantInventory: 1,
			wantDrift:     1,
		},
		{
			name:          "objects progressing: applied, not Ready",
			before:        v1alpha1.Status{},
			res:           result{generation: 2, desired: objs(cm), unhealthy: progressing},
			policy:        v1alpha1.DriftCorrect,
			wantReady:     v1alpha1.ReasonProgressing,
			wantDrifted:   v1alpha1.ReasonInSync,
			wantProgress:  v1alpha1.ConditionReconciling,
			wantObserved:  2,
			wantInventory: 1,
			wantDrift:     0,
		},
		{
			name:          "an object failed: applied, Stalled",
			before:        v1alpha1.Status{},
			res:           result{generation: 2, desired: objs(cm), unhealthy: failedHealth},
			policy:        v1alpha1.DriftCorrect,
			wantReady:     v1alpha1.ReasonHealthCheckFailed,
			wantDrifted:   v1alpha1.ReasonInSync,
			wantProgress:  v1alpha1.ConditionStalled,
			wantObserved:  2,
			wantInventory: 1,
			wantDrift:     0,
		},
		{
			name:          "a failure says more than health",
			before:        v1alpha1.Status{},
			res:           result{generation: 2, desired: objs(cm), unhealthy: progressing, failure: fail(v1alpha1.ReasonPruneFailed, false, "forbidden")},
			policy:        v1alpha1.DriftCorrect,
			wantReady:     v1alpha1.ReasonPruneFailed,
			wantDrifted:   "",
			wantProgress:  v1alpha1.ConditionReconciling,
			wantObserved:  0,
			wantInventory: 0,
			wantDrift:     0,
		},
		{
			name:          "correct keeps the last record",
			before:        v1alpha1.Status{Drift: drift, Conditions: []metav1.Condition{corrected}},
			res:           result{generation: 1, desired: objs(cm)},
			policy:        v1alpha1.DriftCorrect,
			wantReady:     v1alpha1.ReasonReconciled,
			wantDrifted:   v1alpha1.ReasonDriftCorrected,
			wantProgress:  "",
			wantObserved:  1,
			wantInventory: 1,
			wantDrift:     1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := computeStatus(&tt.before, &tt.res, tt.policy)
			if c := meta.FindStatusCondition(got.Conditions, v1alpha1.ConditionReady); c == nil || c.Reason != tt.wantReady {
				t.Errorf("Ready = %+v, want reason %s", c, tt.wantReady)
			}
			c := meta.FindStatusCondition(got.Conditions, v1alpha1.ConditionDrifted)
			if tt.wantDrifted == "" && c != nil && tt.before.Conditions == nil {
				t.Errorf("Drifted = %+v, want none", c)
			}
			if tt.wantDrifted != "" && (c == nil || c.Reason != tt.wantDrifted) {
				t.Errorf("Drifted = %+v, want reason %s", c, tt.wantDrifted)
			}
			for _, typ := range []string{v1alpha1.ConditionStalled, v1alpha1.ConditionReconciling} {
				c := meta.FindStatusCondition(got.Conditions, typ)
				if want := typ == tt.wantProgress; want != (c != nil) || c != nil && (c.Status != metav1.ConditionTrue || c.Reason != tt.wantReady) {
					t.Errorf("%s = %+v, want it %v with reason %s", typ, c, want, tt.wantReady)
				}
			}
			if got.ObservedGeneration != tt.wantObserved {
				t.Errorf("observedGeneration = %d, want %d", got.ObservedGeneration, tt.wantObserved)
			}
			if len(got.Inventory) != tt.wantInventory {
				t.Errorf("inventory = %v, want %d entries", got.Inventory, tt.wantInventory)
			}
			if len(got.Drift) != tt.wantDrift {
				t.Errorf("drift = %v, want %d objects", got.Drift, tt.wantDrift)
			}
		})
	}
}

// The version of the templates and the render digest are those of the last
// full apply: a reconcile that applied nothing keeps them. A resource a
// rollout reached says so until it is Ready.
func TestStatusRecordsTheTemplatesApplied(t *testing.T) {
	before := v1alpha1.Status{Templates: "sha256:old", RenderDigest: "sha256:r1"}
	started := &v1alpha1.RolloutStatus{Templates: "sha256:new", Started: metav1.Now()}
	unhealthy := []engine.ObjectHealth{{Object: "Deployment web", Message: "Available: 0/1"}}
	reached := computeStatus(&before, &result{generation: 1, templates: "sha256:new", renderDigest: "sha256:r2", rollout: started, unhealthy: unhealthy}, v1alpha1.DriftCorrect)
	if reached.Templates != "sha256:new" || reached.RenderDigest != "sha256:r2" || reached.Rollout == nil {
		t.Errorf("after an apply the rollout reached: %q %q %v", reached.Templates, reached.RenderDigest, reached.Rollout)
	}
	if ready := computeStatus(reached, &result{generation: 1, templates: "sha256:new", renderDigest: "sha256:r2"}, v1alpha1.DriftCorrect); ready.Rollout != nil {
		t.Errorf("Ready, and status.rollout still %v", ready.Rollout)
	}
	blocked := computeStatus(&before, &result{generation: 1, failure: &failure{reason: v1alpha1.ReasonOwnershipConflict, err: errors.New("not ours")}}, v1alpha1.DriftCorrect)
	if blocked.Templates != "sha256:old" || blocked.RenderDigest != "sha256:r1" {
		t.Errorf("after an apply that left objects: %q %q", blocked.Templates, blocked.RenderDigest)
	}
}

// A resource waiting for its turn keeps what it had, Ready=True (its
// objects are as they were) with a message that says what waits, and
// Reconciling=True with the reason; no Stalled.
func TestWaitingStatus(t *testing.T) {
	inventory := []v1alpha1.InventoryEntry{{APIVersion: "v1", Kind: "Service", Namespace: "ns", Name: "web"}}
	before := v1alpha1.Status{ObservedGeneration: 2, Inventory: inventory, Templates: "sha256:old", RenderDigest: "sha256:r1",
		Conditions: []metav1.Condition{
			{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonReconciled, Message: "All 1 rendered objects are applied and healthy."},
			{Type: v1alpha1.ConditionStalled, Status: metav1.ConditionTrue, Reason: "x"},
		}}
	for _, reason := range []string{v1alpha1.ReasonRolloutWaiting, v1alpha1.ReasonRolloutHalted} {
		got := computeStatus(&before, &result{generation: 2, waiting: &pending{reason: reason, message: "why", templates: "sha256:new"}}, v1alpha1.DriftCorrect)
		ready := meta.FindStatusCondition(got.Conditions, v1alpha1.ConditionReady)
		if ready.Status != metav1.ConditionTrue || ready.Reason != v1alpha1.ReasonReconciled || !strings.Contains(ready.Message, "sha256:old") || !strings.Contains(ready.Message, "sha256:new") {
			t.Errorf("%s: Ready = %+v", reason, ready)
		}
		if c := meta.FindStatusCondition(got.Conditions, v1alpha1.ConditionReconciling); c == nil || c.Status != metav1.ConditionTrue || c.Reason != reason || c.Message != "why" {
			t.Errorf("%s: Reconciling = %+v", reason, c)
		}
		if meta.FindStatusCondition(got.Conditions, v1alpha1.ConditionStalled) != nil {
			t.Errorf("%s: Stalled stays", reason)
		}
		if got.ObservedGeneration != 2 || len(got.Inventory) != 1 || got.Templates != "sha256:old" || got.RenderDigest != "sha256:r1" {
			t.Errorf("%s: changed what was applied: %+v", reason, got)
		}
	}
}

// TestMessagesAreBounded: a failure however long gives condition messages
// within MaxMessageBytes, cut on a character boundary.
func TestMessagesAreBounded(t *testing.T) {
	long := errors.New(strings.Repeat("ü", 100_000))
	got := computeStatus(&v1alpha1.Status{}, &result{failure: &failure{reason: v1alpha1.ReasonApplyFailed, err: long}}, v1alpha1.DriftCorrect)
	for _, c := range got.Conditions {
		if len(c.Message) > v1alpha1.MaxMessageBytes || !utf8.ValidString(c.Message) {
			t.Errorf("%s message is %d bytes (valid UTF-8: %v), want at most %d", c.Type, len(c.Message), utf8.ValidString(c.Message), v1alpha1.MaxMessageBytes)
		}
	}
}

// TestComputeStatusIsStable: the same result twice gives the same status, so
// a converged resource costs no status write.
func TestComputeStatusIsStable(t *testing.T) {
	cm := &unstructured.Unstructured{}
	cm.SetAPIVersion("v1")
	cm.SetKind("ConfigMap")
	cm.SetName("a")
	for name, res := range map[string]*result{
		"success":     {generation: 3, desired: objs(cm)},
		"progressing": {generation: 3, desired: objs(cm), unhealthy: []engine.ObjectHealth{{Object: "Deployment web", Message: "Replicas: 0/1"}}},
		"stalled":     {generation: 3, desired: objs(cm), failure: &failure{reason: v1alpha1.ReasonOwnershipConflict, stalled: true, err: errors.New("not ours")}},
	} {
		first := computeStatus(&v1alpha1.Status{}, res, v1alpha1.DriftCorrect)
		for i := range first.Conditions { // as if written an hour ago
			first.Conditions[i].LastTransitionTime = metav1.NewTime(first.Conditions[i].LastTransitionTime.Add(-time.Hour))
		}
		second := computeStatus(first, res, v1alpha1.DriftCorrect)
		if !equality.Semantic.DeepEqual(first, second) {
			t.Errorf("%s: status changed on a second identical reconcile:\n%+v\n%+v", name, first, second)
		}
	}
}

func objs(o ...*unstructured.Unstructured) []*unstructured.Unstructured { return o }

func TestRecordTransitions(t *testing.T) {
	cond := func(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: "m"}
	}
	ready := cond(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReconciled)
	failed := cond(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonApplyFailed)
	inSync := cond(v1alpha1.ConditionDrifted, metav1.ConditionFalse, v1alpha1.ReasonInSync)
	fixed := cond(v1alpha1.ConditionDrifted, metav1.ConditionFalse, v1alpha1.ReasonDriftCorrected)
	found := cond(v1alpha1.ConditionDrifted, metav1.ConditionTrue, v1alpha1.ReasonDriftDetected)
	progressing := cond(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonProgressing)
	unhealthy := cond(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonHealthCheckFailed)
	notChecked := cond(v1alpha1.ConditionDrifted, metav1.ConditionUnknown, v1alpha1.ReasonDriftNotChecked)
	tests := []struct {
		name          string
		before, after []metav1.Condition
		want          []string
	}{
		{"healthy from the start is no news", nil, []metav1.Condition{ready, inSync}, nil},
		{"failing from the start", nil, []metav1.Condition{failed}, []string{"Warning ApplyFailed m"}},
		{"drift corrected on the first reconcile", nil, []metav1.Condition{ready, fixed}, []string{"Normal DriftCorrected m"}},
		{"recovered", []metav1.Condition{failed}, []metav1.Condition{ready}, []string{"Normal Reconciled m"}},
		{"drift found", []metav1.Condition{ready, inSync}, []metav1.Condition{ready, found}, []string{"Warning DriftDetected m"}},
		{"unchanged", []metav1.Condition{ready, found}, []metav1.Condition{ready, found}, nil},
		{"progressing from the start is no news", nil, []metav1.Condition{progressing}, nil},
		{"progressing after a rollout is no news", []metav1.Condition{ready}, []metav1.Condition{progressing}, nil},
		{"healthy after progressing is no news", []metav1.Condition{progressing}, []metav1.Condition{ready}, nil},
		{"an object failed", []metav1.Condition{progressing}, []metav1.Condition{unhealthy}, []string{"Warning HealthCheckFailed m"}},
		{"recovered from a failed object", []metav1.Condition{unhealthy}, []metav1.Condition{ready}, []string{"Normal Reconciled m"}},
		{"recovering: applied after a failure", []metav1.Condition{failed}, []metav1.Condition{progressing}, []string{"Normal Progressing m"}},
		{"recovering: a failed object on its way", []metav1.Condition{unhealthy}, []metav1.Condition{progressing}, []string{"Normal Progressing m"}},
		{"nodes begin to wait is no news", []metav1.Condition{ready, inSync}, []metav1.Condition{ready, notChecked}, nil},
		{"nodes stop waiting is no news", []metav1.Condition{ready, notChecked}, []metav1.Condition{ready, inSync}, nil},
		{"drift found after nodes waited", []metav1.Condition{ready, notChecked}, []metav1.Condition{ready, found}, []string{"Warning DriftDetected m"}},
		{"drift gone while nodes wait", []metav1.Condition{ready, found}, []metav1.Condition{ready, notChecked}, []string{"Normal DriftNotChecked m"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := events.NewFakeRecorder(10)
			r := &Reconciler{recorder: rec}
			r.recordTransitions(&testv1alpha1.Widget{}, tt.before, tt.after)
			close(rec.Events)
			var got []string
			for e := range rec.Events {
				got = append(got, e)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("events %q, want %q", got, tt.want)
			}
		})
	}
}

func TestHealthMessage(t *testing.T) {
	waiting := engine.ObjectHealth{Object: "Deployment web", Message: "Available: 0/1", Hint: "kubectl describe deployment.apps web -n ns"}
	failed := engine.ObjectHealth{Object: "Job migrate", Message: "Job Failed. failed: 1/1", Hint: "kubectl describe job.batch migrate -n ns", Failed: true}
	running := engine.ObjectHealth{Object: "Job seed", Message: "Job seed to complete (Job in progress)", Hint: "kubectl describe job.batch seed -n ns", Named: true}
	tests := []struct {
		name      string
		unhealthy []engine.ObjectHealth
		want      string
	}{
		{"one waiting", []engine.ObjectHealth{waiting},
			"All 3 rendered objects are applied, but 1 not ready yet: Deployment web: Available: 0/1. stencil looks again when their status changes."},
		{"failed first, with how to look", []engine.ObjectHealth{failed, waiting},
			"All 3 rendered objects are applied, but 1 failed and 1 not ready yet: Job migrate: Job Failed. failed: 1/1; Deployment web: Available: 0/1. See why with kubectl describe job.batch migrate -n ns. stencil looks again when their status changes."},
		{"only failed", []engine.ObjectHealth{failed},
			"All 3 rendered objects are applied, but 1 failed: Job migrate: Job Failed. failed: 1/1. See why with kubectl describe job.batch migrate -n ns. stencil looks again when their status changes."},
		{"a graph node's rules name the object", []engine.ObjectHealth{running},
			"All 3 rendered objects are applied, but 1 not ready yet: Job seed to complete (Job in progress). stencil looks again when their status changes."},
		{"many", []engine.ObjectHealth{waiting, waiting, waiting, waiting, waiting},
			"All 3 rendered objects are applied, but 5 not ready yet: Deployment web: Available: 0/1; Deployment web: Available: 0/1; Deployment web: Available: 0/1; and 2 more. stencil looks again when their status changes."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := healthMessage(3, tt.unhealthy); got != tt.want {
				t.Errorf("healthMessage =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// TestHealthPace: a status write that only tells of health waits until a
// second has passed since the resource's last write; one that tells of a
// new generation, or of anything but health, never waits.
func TestHealthPace(t *testing.T) {
	ready := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonReconciled}
	progressing := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonProgressing}
	failed := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonApplyFailed}
	status := func(gen int64, c metav1.Condition) *v1alpha1.Status {
		return &v1alpha1.Status{ObservedGeneration: gen, Conditions: []metav1.Condition{c}}
	}
	withDrift := func(s *v1alpha1.Status) *v1alpha1.Status {
		s.Drift = []v1alpha1.ObjectDrift{{Kind: "Deployment", Name: "web", Reverted: true}}
		return s
	}
	tests := []struct {
		name          string
		writtenAgo    time.Duration // 0: never written
		before, after *v1alpha1.Status
		paced         bool
	}{
		{"health flips soon after a write", 100 * time.Millisecond, status(1, ready), status(1, progressing), true},
		{"and back", 100 * time.Millisecond, status(1, progressing), status(1, ready), true},
		{"a second later", 1100 * time.Millisecond, status(1, ready), status(1, progressing), false},
		{"a new generation", 100 * time.Millisecond, status(1, ready), status(2, progressing), false},
		{"a failure", 100 * time.Millisecond, status(1, progressing), status(1, failed), false},
		{"nothing written yet", 0, status(1, ready), status(1, progressing), false},
		{"no health involved", 100 * time.Millisecond, status(1, ready), status(1, ready), false},
		{"a drift report too", 100 * time.Millisecond, status(1, ready), withDrift(status(1, progressing)), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Reconciler{}
			key := client.ObjectKey{Namespace: "ns", Name: "web"}
			if tt.writtenAgo > 0 {
				r.memory.update(key, func(m *remembered) { m.written = &writtenStatus{at: time.Now().Add(-tt.writtenAgo)} })
			}
			if got := r.healthPace(key, tt.before, tt.after); (got > 0) != tt.paced || got > statusPace {
				t.Errorf("healthPace = %s, want paced %v (at most %s)", got, tt.paced, statusPace)
			}
		})
	}
}

// status.rollout says which version reached the resource while the rollout
// counts it: the gate's word after a reconcile that got through (nil once
// its spec changed), kept after a failure of the same spec, dropped after
// a failure of a new one (issue 32: else a restarted stencil counted a
// resource whose own spec broke it, and halted everyone again).
func TestComputeStatusRollout(t *testing.T) {
	reached := &v1alpha1.RolloutStatus{Templates: "sha256:new", Started: metav1.Now()}
	before := &v1alpha1.Status{ObservedGeneration: 1, Rollout: reached}
	progressing := []engine.ObjectHealth{{}}
	failed := &failure{reason: v1alpha1.ReasonOwnershipConflict, err: errors.New("taken"), stalled: true}
	for _, tt := range []struct {
		name string
		res  result
		want *v1alpha1.RolloutStatus
	}{
		{"Ready: through with it", result{generation: 1}, nil},
		{"applied, not Ready, still counted", result{generation: 1, unhealthy: progressing, rollout: reached}, reached},
		{"applied, not Ready, out of the rollout", result{generation: 2, unhealthy: progressing}, nil},
		{"failed, same spec", result{generation: 1, failure: failed}, reached},
		{"failed, new spec", result{generation: 2, failure: failed}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := computeStatus(before, &tt.res, v1alpha1.DriftCorrect).Rollout; !equality.Semantic.DeepEqual(got, tt.want) {
				t.Errorf("status.rollout = %+v, want %+v", got, tt.want)
			}
		})
	}
}
