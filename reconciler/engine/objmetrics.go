package engine

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The counters of the objects stencil writes, labelled with the kind of
// custom resource (or the decorator) that wrote them, served on the
// manager's /metrics endpoint beside controller-runtime's. Other packages
// add to them through CountObjects alone.
var (
	appliedObjects = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stencil_applied_objects_total",
		Help: "Objects server-side-applied: created, changed by a new render, or re-applied after drift.",
	}, []string{"kind"})
	prunedObjects = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stencil_pruned_objects_total",
		Help: "Objects deleted because the render no longer holds them.",
	}, []string{"kind"})
	revertedObjects = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stencil_drift_reverted_objects_total",
		Help: "Objects whose fields another manager had taken and stencil re-applied (drift policy Correct).",
	}, []string{"kind"})
)

func init() {
	metrics.Registry.MustRegister(appliedObjects, prunedObjects, revertedObjects)
}

// StartObjectCounters makes the object counters of kind exist at zero, so
// that a dashboard's rate or increase has a start.
func StartObjectCounters(kind string) {
	for _, c := range []*prometheus.CounterVec{appliedObjects, prunedObjects, revertedObjects} {
		c.WithLabelValues(kind)
	}
}

// CountObjects adds to kind's counters the objects one write applied,
// pruned and reverted (drift corrected).
func CountObjects(kind string, applied, pruned, reverted int) {
	for _, c := range []struct {
		vec *prometheus.CounterVec
		n   int
	}{{appliedObjects, applied}, {prunedObjects, pruned}, {revertedObjects, reverted}} {
		if c.n > 0 {
			c.vec.WithLabelValues(kind).Add(float64(c.n))
		}
	}
}
