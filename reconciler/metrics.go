package reconciler

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/reconciler/engine"
)

// The metrics stencil serves beside controller-runtime's, on the manager's
// /metrics endpoint. Each is labelled with the kind of custom resource.
var (
	fightsStarted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stencil_fights_total",
		Help: "Fights started: objects whose fields another writer took back 3 times in a row after stencil reverted them, from when stencil paces its corrections.",
	}, []string{"kind"})
	unseenRechecks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stencil_unseen_apply_rechecks_total",
		Help: "Resources reconciled again because the watch had not shown one of their applies 30 s after it: watch events were missed, or the cache is far behind.",
	}, []string{"kind"})
	unhealthy   = newUnhealthyResources()
	kindWaiting = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "stencil_kind_waiting",
		Help: "1 for each type (group/version/Kind) a kind needs that the cluster does not serve (its CRD is not installed): the kind does not run (its own type) or its resources are Stalled with reason TypeNotServed until it is.",
	}, []string{"kind", "type"})
)

func init() {
	metrics.Registry.MustRegister(fightsStarted, unseenRechecks, unhealthy, kindWaiting)
}

// startCounters makes the counters of kind exist at zero, so that a
// dashboard's rate or increase has a start, and every series is served
// before its first event.
func startCounters(kind string) {
	engine.StartObjectCounters(kind)
	for _, c := range []*prometheus.CounterVec{fightsStarted, unseenRechecks} {
		c.WithLabelValues(kind)
	}
}

// countFights adds the fights one reconcile started, and the corrections
// it made during fights (whose drift is not reported anew).
func countFights(kind string, started, corrections int) {
	if started > 0 {
		fightsStarted.WithLabelValues(kind).Add(float64(started))
	}
	if corrections > 0 {
		engine.CountObjects(kind, 0, 0, corrections)
	}
}

// countObjects adds what one reconcile applied, pruned and reverted.
func countObjects(kind string, res *result) {
	reverted := 0
	for _, d := range res.drift {
		if d.Reverted {
			reverted++
		}
	}
	engine.CountObjects(kind, len(res.applied), len(res.pruned), reverted)
}

// watchedConditions are the conditions whose unhealthy state is counted.
var watchedConditions = []string{v1alpha1.ConditionReady, v1alpha1.ConditionDrifted}

// unhealthyResources is the gauge stencil_unhealthy_resources{kind,
// condition}: the custom resources whose last reconcile left Ready False,
// or Drifted True (drift policy Report). It counts, at scrape time, sets
// that reconciles keep up to date, so that an alert needs no query of the
// API server.
type unhealthyResources struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	// sets holds, per kind and condition, the resources now unhealthy.
	sets map[[2]string]map[types.NamespacedName]struct{}
}

func newUnhealthyResources() *unhealthyResources {
	return &unhealthyResources{
		desc: prometheus.NewDesc("stencil_unhealthy_resources",
			"Custom resources whose last reconcile left Ready False, or Drifted True.", []string{"kind", "condition"}, nil),
		sets: map[[2]string]map[types.NamespacedName]struct{}{},
	}
}

// track makes the gauge report 0 for kind until a resource is unhealthy.
func (u *unhealthyResources) track(kind string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, typ := range watchedConditions {
		u.setOf(kind, typ)
	}
}

// set records the conditions of a resource's new status.
func (u *unhealthyResources) set(kind string, nn types.NamespacedName, conditions []metav1.Condition) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, typ := range watchedConditions {
		set := u.setOf(kind, typ)
		if c := meta.FindStatusCondition(conditions, typ); c != nil && !healthy(*c) {
			set[nn] = struct{}{}
		} else {
			delete(set, nn)
		}
	}
}

// setOf is the set of kind's resources unhealthy by condition typ, made
// empty on first use. The caller holds u.mu.
func (u *unhealthyResources) setOf(kind, typ string) map[types.NamespacedName]struct{} {
	key := [2]string{kind, typ}
	if u.sets[key] == nil {
		u.sets[key] = map[types.NamespacedName]struct{}{}
	}
	return u.sets[key]
}

// forget drops a deleted resource.
func (u *unhealthyResources) forget(kind string, nn types.NamespacedName) {
	u.set(kind, nn, nil)
}

// Describe implements [prometheus.Collector].
func (u *unhealthyResources) Describe(ch chan<- *prometheus.Desc) { ch <- u.desc }

// Collect implements [prometheus.Collector].
func (u *unhealthyResources) Collect(ch chan<- prometheus.Metric) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for key, set := range u.sets {
		ch <- prometheus.MustNewConstMetric(u.desc, prometheus.GaugeValue, float64(len(set)), key[0], key[1])
	}
}
