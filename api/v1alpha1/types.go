package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// DriftPolicy says what stencil does when another field manager takes a field
// that a template sets.
// +kubebuilder:validation:Enum=Correct;Report
type DriftPolicy string

const (
	// DriftCorrect re-applies the desired value (with force) and keeps a
	// bounded record of what it reverted. The default.
	DriftCorrect DriftPolicy = "Correct"
	// DriftReport leaves the changed field alone, shows it in status and sets
	// Drifted=True.
	DriftReport DriftPolicy = "Report"
)

// Object is a custom resource that stencil reconciles: every kind's Go type
// implements it by embedding [Status] in its status.
// +kubebuilder:object:generate=false
type Object interface {
	metav1.Object
	runtime.Object
	// StencilStatus returns the status fields that stencil owns.
	StencilStatus() *Status
	// StencilDriftPolicy returns the resource's drift policy (Correct when unset).
	StencilDriftPolicy() DriftPolicy
}

// Status is the status that every kind shares. Kinds embed it inline.
type Status struct {
	// ObservedGeneration is the generation that stencil last reconciled
	// successfully.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready (every rendered object applied, nothing pruned that
	// should stay), Drifted (another manager holds a field a template sets),
	// and, while the resource is not Ready, Reconciling (stencil retries on
	// its own) or Stalled (a retry cannot help until someone acts).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Inventory lists the objects stencil applied for this resource, at most
	// MaxInventory entries.
	// +listType=atomic
	// +optional
	Inventory []InventoryEntry `json:"inventory,omitempty"`

	// Drift lists what differs now (policy Report) or what was last reverted
	// (policy Correct), at most MaxDriftObjects objects.
	// +listType=atomic
	// +optional
	Drift []ObjectDrift `json:"drift,omitempty"`

	// Templates is the version of the kind's templates that stencil last
	// applied this resource with ("sha256:" and the start of a digest of
	// the kind's template folder). A stencil whose templates differ rolls
	// their change out at a bounded pace (see --rollout-batch).
	// +optional
	Templates string `json:"templates,omitempty"`

	// RenderDigest is a digest of the objects stencil last applied: a new
	// version of the templates that renders the same objects for this
	// resource changes nothing and is not paced.
	// +optional
	RenderDigest string `json:"renderDigest,omitempty"`

	// OwnedFields is a digest of the fields stencil's field manager owned
	// on each applied object right after its last apply: a restarted
	// stencil whose objects still match it knows, without a request, that
	// no field was taken since.
	// +optional
	OwnedFields string `json:"ownedFields,omitempty"`

	// Rollout is set while a paced rollout of new templates has reached
	// this resource and it is not Ready yet: which version, since when. A
	// restarted stencil counts such resources against --rollout-batch.
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`

	// Once records, for each graph node declared once (a chart's hooks),
	// the digest of the objects stencil last applied for it: such an
	// object that is gone since (a Job its ttlSecondsAfterFinished removed)
	// is not made again until the node renders other objects.
	// +optional
	// +listType=map
	// +listMapKey=node
	Once []OnceApplied `json:"once,omitempty"`
}

// OnceApplied is a graph node declared once, and the digest of the
// objects stencil applied for it.
type OnceApplied struct {
	Node   string `json:"node"`
	Digest string `json:"digest"`
}

// RolloutStatus is the paced rollout that reached a resource.
type RolloutStatus struct {
	// Templates is the version of the templates it brought.
	Templates string `json:"templates"`
	// Started is when it reached the resource.
	Started metav1.Time `json:"started"`
}

// IsSharedStatusField reports whether a status field belongs to [Status],
// which stencil itself writes; a kind's status template may not set it.
func IsSharedStatusField(name string) bool {
	switch name {
	case "observedGeneration", "conditions", "inventory", "drift", "templates", "renderDigest", "ownedFields", "rollout":
		return true
	}
	return false
}

// InventoryEntry names one applied object.
type InventoryEntry struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// ObjectDrift is the drift of one object.
type ObjectDrift struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Fields that another manager took, at most MaxDriftFields.
	// +listType=atomic
	Fields []FieldDrift `json:"fields"`
	// Diff is a short unified diff of the drifted fields, desired (-) against
	// live (+), as `kubectl diff` prints it.
	// +optional
	Diff string `json:"diff,omitempty"`
	// Reverted is true when stencil re-applied the desired values.
	// +optional
	Reverted bool `json:"reverted,omitempty"`
}

// FieldDrift is one field that another manager took.
type FieldDrift struct {
	// Path of the field, as in ".spec.replicas" or
	// ".spec.template.spec.containers[name=\"web\"].image".
	Path string `json:"path"`
	// Desired value, as JSON; masked for Secrets.
	// +optional
	Desired string `json:"desired,omitempty"`
	// Live value, as JSON; masked for Secrets; empty when the field is gone.
	// +optional
	Live string `json:"live,omitempty"`
	// Manager that now holds the field, when one does.
	// +optional
	Manager string `json:"manager,omitempty"`
	// Time of that manager's last change.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
}

// Bounds on what status holds, so that a large render cannot make the custom
// resource too large to store.
const (
	MaxInventory    = 256
	MaxDriftObjects = 16
	MaxDriftFields  = 16
	MaxDiffBytes    = 2048
	// MaxValueBytes bounds each desired and live value in a drift report,
	// and MaxPathBytes each field path.
	MaxValueBytes = 512
	MaxPathBytes  = 512
	// MaxMessageBytes bounds every condition message stencil writes.
	MaxMessageBytes = 2048
)

// Condition types.
const (
	// ConditionReady is True when every rendered object is applied, in
	// sync (or its drift is only reported) and healthy by the kstatus rules.
	ConditionReady = "Ready"
	// ConditionDrifted is True when another manager holds a field that a
	// template sets and the policy is Report.
	ConditionDrifted = "Drifted"
	// ConditionReconciling is True while stencil is still working towards
	// the desired state and will retry on its own (kstatus: in progress).
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when a retry cannot help until someone acts:
	// a template or spec error, or an object that is not this resource's
	// (kstatus: failed).
	ConditionStalled = "Stalled"
)

// Condition reasons. Each tells the user what happened; the condition message
// says what to do.
const (
	ReasonReconciled    = "Reconciled"
	ReasonRenderFailed  = "RenderFailed"
	ReasonApplyFailed   = "ApplyFailed"
	ReasonPruneFailed   = "PruneFailed"
	ReasonEmptyRender   = "EmptyRender"
	ReasonInSync        = "InSync"
	ReasonDriftDetected = "DriftDetected"
	// ReasonDriftUnknown (Drifted=Unknown): a resource that waits for a
	// paced rollout, whose objects' field records differ from those of
	// stencil's last apply; what changed before it began to keep them
	// cannot be told.
	ReasonDriftUnknown = "DriftUnknown"
	// ReasonDriftNotChecked (Drifted=Unknown): nodes of a graph kind wait,
	// and stencil neither checks nor corrects the objects they rendered
	// before until they render again; the objects it applied have the
	// values their templates set. Drift last seen in the waiting nodes'
	// objects stays in status.drift, and then Drifted stays True.
	ReasonDriftNotChecked = "DriftNotChecked"
	ReasonDriftCorrected  = "DriftCorrected"
	// ReasonFieldFight: another writer keeps taking back fields stencil
	// reverts; stencil paces its corrections.
	ReasonFieldFight = "FieldFight"
	ReasonDeleting   = "Deleting"
	// ReasonOwnershipConflict: a rendered object exists and is not this
	// resource's; stencil leaves it untouched.
	ReasonOwnershipConflict = "OwnershipConflict"
	// ReasonFinalizerFailed: the cleanup finalizer could not be added.
	ReasonFinalizerFailed = "FinalizerFailed"
	// ReasonCleanupFailed: the resource is being deleted and deleting its
	// cluster-scoped objects failed; the finalizer stays until it succeeds.
	ReasonCleanupFailed = "CleanupFailed"
	// ReasonImmutableField: the API server refused to change a field that
	// cannot change once set (a Deployment's selector, say).
	ReasonImmutableField = "ImmutableField"
	// ReasonRejected: the API server rejected an object as invalid (422,
	// 400, too large): a retry of the same render cannot succeed. The
	// resource's other objects are applied; nothing is pruned.
	ReasonRejected = "Rejected"
	// ReasonForbidden: the ServiceAccount that writes the resource's
	// objects (see --default-service-account) may not create or patch one
	// of the types the render holds; nothing was applied or pruned.
	ReasonForbidden = "Forbidden"
	// ReasonLimitExceeded: the render (or the status template) went over one
	// of the operator's render limits (--render-max-steps, --render-timeout, --render-max-bytes,
	// --render-max-objects, --status-max-bytes); nothing was applied or
	// pruned. A spec that asks too much, or a limit set too low.
	ReasonLimitExceeded = "LimitExceeded"
	// ReasonStatusTemplateFailed: the kind's status template failed.
	ReasonStatusTemplateFailed = "StatusTemplateFailed"
	// ReasonReconcilePanicked: the reconcile panicked (a bug in stencil).
	ReasonReconcilePanicked = "ReconcilePanicked"
	// ReasonProgressing: every object is applied, and some are not healthy
	// yet by the kstatus rules (a Deployment whose pods are not available,
	// say); stencil looks again when their status changes.
	ReasonProgressing = "Progressing"
	// ReasonInputReadFailed: reading an input of a graph kind failed (a
	// timeout, a throttled API server); retried with backoff.
	ReasonInputReadFailed = "InputReadFailed"
	// ReasonWaiting: a graph kind's nodes wait for the objects of earlier
	// nodes to be ready, for a value or for an input (Reconciling).
	ReasonWaiting = "Waiting"
	// ReasonHealthCheckFailed: every object is applied, and kstatus says
	// some failed (a Deployment past its progress deadline, a failed Job).
	ReasonHealthCheckFailed = "HealthCheckFailed"
	// ReasonRolloutWaiting (of Reconciling, while Ready stays True): a new
	// version of the templates changes this resource's objects; stencil
	// rolls such changes out to a few resources of the kind at a time and
	// applies this one when its turn comes.
	ReasonRolloutWaiting = "RolloutWaiting"
	// ReasonRolloutHalted (of Reconciling, while Ready stays True): the
	// rollout of a new version of the templates stopped because a resource
	// it reached did not become Ready in time; this resource's objects stay
	// as they are until that resource is Ready or deleted.
	ReasonRolloutHalted = "RolloutHalted"
	// ReasonTypeNotServed (Stalled): a type the kind needs (its owned,
	// observed or input types, declared in _kind.yaml) is not served by
	// the cluster: its CRD is not installed. The kind's other resources
	// and kinds run; this one starts when the type is served.
	ReasonTypeNotServed = "TypeNotServed"
	// ReasonGeneratedValuesFailed: reading or writing the Secret that
	// keeps the values a chart kind's templates generated for the
	// resource (randAlphaNum, genCA, ...) failed; nothing was applied, as
	// it would have applied values that no later render sees. Retried
	// with backoff.
	ReasonGeneratedValuesFailed = "GeneratedValuesFailed"
)

// Labels and annotations that stencil puts on every object it applies.
const (
	// LabelManagedBy (value ManagedByStencil) marks objects that stencil
	// applies; its cache watches only objects with this label.
	LabelManagedBy   = "app.kubernetes.io/managed-by"
	ManagedByStencil = "stencil"
	// LabelOwnerUID holds the UID of the custom resource that the object was
	// rendered for. Prune selects by it.
	LabelOwnerUID = "stencil.dev/owner-uid"
	// LabelShard, on a custom resource, names the shard (the stencil
	// process, see --shard) that reconciles it; without it, or naming no
	// known shard, the default shard does.
	LabelShard = "stencil.dev/shard"
	// LabelClaim, on a custom resource, names the shard that holds it
	// ("default" for the default shard): set by that shard before it
	// writes anything for the resource, removed once the resource has left
	// its shard (or taken over when that shard no longer runs), so that a
	// moved resource has one writer at a time.
	LabelClaim = "stencil.dev/claimed-by"
	// AnnotationPrunePending, on a custom resource, is set (to "true") by
	// the shard that claims it while it has objects, with the claim: they
	// may carry another shard's label, which this shard's cache does not
	// hold, so its next prune lists them from the API server. That shard
	// removes it after that prune: a new leader that takes over in between
	// does the same prune.
	AnnotationPrunePending = "stencil.dev/prune-pending"
	// AnnotationOrphaning, on a custom resource being deleted with
	// propagationPolicy Orphan, is set (to "true") by stencil when it
	// first acts on that deletion, before it removes any ownerReference:
	// once the garbage collector has removed its orphan finalizer, it is
	// what tells a restarted stencil that the objects stay.
	AnnotationOrphaning = "stencil.dev/orphaning"
	// AnnotationClaimLease, on a custom resource, names the leader Lease
	// of the shard that holds its claim, set with the claim by a process
	// that elects its leader. Only such a claim is taken over when that
	// Lease stops changing (the shard no longer runs): without a Lease
	// nothing tells a stopped shard from a running one.
	AnnotationClaimLease = "stencil.dev/claimed-under-lease"
	// LabelDecorator names the decorator that rendered an object for a
	// parent stencil does not own (with LabelOwnerUID, the parent's UID);
	// the decorators' cache and prune select by it.
	LabelDecorator = "stencil.dev/decorator"
	// AnnotationDecoratorStatus + a decorator's name, on a decorated
	// parent: what the decorator last set back after another manager
	// changed it (JSON: reverted, a count, and last, a FieldDrift). A
	// decorator has no status of its own; `stencil drift` reads this.
	AnnotationDecoratorStatus = "status.stencil.dev/"
	// AnnotationOwner names that custom resource as
	// "<Kind>.<group>/<namespace>/<name>": the second proof of ownership
	// before a prune, and how events on cluster-scoped objects find their
	// owner.
	AnnotationOwner = "stencil.dev/owner"
	// AnnotationDesiredHash is the hash of the object as rendered; a new
	// render with another hash is applied.
	AnnotationDesiredHash = "stencil.dev/desired-hash"
	// AnnotationAdopt, set by a person on an existing object, lets the
	// custom resource it names (an [AnnotationOwner] value) take the object
	// over. Without it stencil never applies to an object it did not
	// create for that resource.
	AnnotationAdopt = "stencil.dev/adopt"
	// AnnotationConversionFailed marks, in a list read at another version
	// of a kind, a resource whose conversion failed: its metadata, without
	// spec or status, and why. stencil does not reconcile a resource that
	// carries it, and its admission policy refuses it written.
	AnnotationConversionFailed = "stencil.dev/conversion-failed"
	// AnnotationHandOver, set by a template on an object it renders, lists
	// fields (comma-separated dotted paths, as "spec.replicas") that
	// stencil sets only until another field manager takes them, as an
	// autoscaler takes a Deployment's replicas: from then on stencil leaves
	// them as they are, and their value is not drift.
	AnnotationHandOver = "stencil.dev/hand-over"
	// AnnotationPrune, set by a template to PruneDisabled on an object it
	// renders, keeps the object when the template stops rendering it and
	// when the custom resource is deleted (no ownerReference: the garbage
	// collector leaves it too). As Flux's kustomize.toolkit.fluxcd.io/prune.
	AnnotationPrune = "stencil.dev/prune"
	PruneDisabled   = "disabled"
	// AnnotationSSA, set by a template to SSAIfNotPresent on an object it
	// renders, makes stencil create the object when it does not exist and
	// never update it afterwards; what others change in it is reported as
	// drift, never reverted. As Flux's kustomize.toolkit.fluxcd.io/ssa.
	AnnotationSSA   = "stencil.dev/ssa"
	SSAIfNotPresent = "IfNotPresent"
	// AnnotationForce, set by a template on an object it renders, lets
	// stencil delete and create the object anew when an apply is refused
	// because it changes an immutable field. ForceEnabled does so except
	// for objects that hold data (PersistentVolumeClaims,
	// PersistentVolumes), which need ForceEnabledDataLoss. As Flux's
	// kustomize.toolkit.fluxcd.io/force.
	AnnotationForce      = "stencil.dev/force"
	ForceEnabled         = "enabled"
	ForceEnabledDataLoss = "enabled-data-loss"
	// AnnotationGraphNode and AnnotationGraphStage, on an object of a
	// graph kind, name the node (template) that rendered it and its place
	// in the graph: a custom resource's objects are deleted from the
	// highest stage down, and a node that waits keeps its objects.
	AnnotationGraphNode  = "stencil.dev/graph-node"
	AnnotationGraphStage = "stencil.dev/graph-stage"
	// ReasonRecreating: stencil deleted an object to create it anew (an
	// immutable field changed and its template allows it).
	ReasonRecreating = "Recreating"
)

// OrDefault returns the policy, or DriftCorrect when it is unset.
func (p DriftPolicy) OrDefault() DriftPolicy {
	if p == "" {
		return DriftCorrect
	}
	return p
}

// The reasons' names before they were named after their values; kept for
// one release.
const (
	// Deprecated: use ReasonDriftDetected.
	ReasonDriftFound = ReasonDriftDetected
	// Deprecated: use ReasonDriftCorrected.
	ReasonDriftFixed = ReasonDriftCorrected
	// Deprecated: use ReasonFieldFight.
	ReasonFighting = ReasonFieldFight
	// Deprecated: use ReasonStatusTemplateFailed.
	ReasonStatusFailed = ReasonStatusTemplateFailed
	// Deprecated: use ReasonReconcilePanicked.
	ReasonPanicked = ReasonReconcilePanicked
)
