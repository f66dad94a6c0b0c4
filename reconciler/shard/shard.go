package shard

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// Shards splits the custom resources between processes (issue 14, work in
// progress): each process reconciles the resources of its shard, chosen by
// the label v1alpha1.LabelShard, and holds a Lease of its own. The default
// shard ("") takes every resource whose label names no known shard (none,
// empty, or a name no process serves), so that a resource is never
// nobody's.
type Shards struct {
	// Name is this process's shard; "" is the default shard.
	Name string
	// Known lists every shard but the default.
	Known []string
	// Leases, when set, lets this shard take over the claims of a shard
	// whose leader Lease has stayed unchanged for Leases.Wait (see
	// takeover.go). nil: a claim waits until its holder gives it up.
	Leases *Leases
}

// Check refuses a shard that Known does not list, and a default shard
// among Known.
func (s Shards) Check() error {
	if s.Name != "" && !slices.Contains(s.Known, s.Name) {
		return fmt.Errorf("shard %q is not among the known shards %v: every process must be told them all, or the default shard would take this shard's resources too", s.Name, s.Known)
	}
	if slices.Contains(s.Known, "") || slices.Contains(s.Known, "default") {
		return fmt.Errorf("the default shard is not named among the known shards (nor may a shard be named default)")
	}
	return nil
}

// Selector selects the custom resources of this process's shard.
func (s Shards) Selector() (labels.Selector, error) {
	op, values := selection.In, []string{s.Name}
	if s.Name == "" {
		if len(s.Known) == 0 {
			return labels.Everything(), nil
		}
		// notin also matches resources without the label.
		op, values = selection.NotIn, s.Known
	}
	r, err := labels.NewRequirement(v1alpha1.LabelShard, op, values)
	if err != nil {
		return nil, fmt.Errorf("shard selector: %w", err)
	}
	return labels.NewSelector().Add(*r), nil
}

// LeaseName is the name of the shard's leader Lease.
func (s Shards) LeaseName(base string) string {
	if s.Name == "" {
		return base
	}
	return base + "-" + s.Name
}

// ClaimName is a shard's value of the claim label.
func ClaimName(s *Shards) string {
	if s.Name == "" {
		return "default"
	}
	return s.Name
}
