package engine

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The counters of the objects stencil writes, labelled with the kind of
// custom resource (or the decorator) that wrote them, served on the
// manager's /metrics endpoint beside controller-runtime's.
var (
	AppliedObjects = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stencil_applied_objects_total",
		Help: "Objects server-side-applied: created, changed by a new render, or re-applied after drift.",
	}, []string{"kind"})
	PrunedObjects = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stencil_pruned_objects_total",
		Help: "Objects deleted because the render no longer holds them.",
	}, []string{"kind"})
	RevertedObjects = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stencil_drift_reverted_objects_total",
		Help: "Objects whose fields another manager had taken and stencil re-applied (drift policy Correct).",
	}, []string{"kind"})
)

func init() {
	metrics.Registry.MustRegister(AppliedObjects, PrunedObjects, RevertedObjects)
}

// StartObjectCounters makes the object counters of kind exist at zero, so
// that a dashboard's rate or increase has a start.
func StartObjectCounters(kind string) {
	for _, c := range []*prometheus.CounterVec{AppliedObjects, PrunedObjects, RevertedObjects} {
		c.WithLabelValues(kind)
	}
}
