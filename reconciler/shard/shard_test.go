package shard

import (
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

// TestShardSelector: every resource belongs to exactly one shard, the
// default shard taking those whose label names none.
func TestShardSelector(t *testing.T) {
	known := []string{"a", "b"}
	resources := map[string]labels.Set{
		"no label":      {},
		"empty":         {"stencil.dev/shard": ""},
		"a":             {"stencil.dev/shard": "a"},
		"b":             {"stencil.dev/shard": "b"},
		"unknown shard": {"stencil.dev/shard": "c"},
	}
	want := map[string]string{"no label": "", "empty": "", "a": "a", "b": "b", "unknown shard": ""}
	for name, set := range resources {
		var owners []string
		for _, shard := range []string{"", "a", "b"} {
			sel, err := Shards{Name: shard, Known: known}.Selector()
			if err != nil {
				t.Fatal(err)
			}
			if sel.Matches(set) {
				owners = append(owners, shard)
			}
		}
		if len(owners) != 1 || owners[0] != want[name] {
			t.Errorf("%s: shards %q, want only %q", name, owners, want[name])
		}
	}
	if err := (Shards{Name: "c", Known: known}).Check(); err == nil {
		t.Error("an unknown shard was accepted")
	}
	if sel, _ := (Shards{}).Selector(); !sel.Empty() {
		t.Errorf("unsharded: %v, want everything", sel)
	}
}

// TestLeaseOfAClaimHolder: a claim's value names the Lease that tells
// whether its shard runs, the default shard's being the base name.
func TestLeaseOfAClaimHolder(t *testing.T) {
	leases := Leases{Namespace: "stencil-system", Base: "stencil.stencil.dev"}
	for holder, want := range map[string]string{
		"default": "stencil-system/stencil.stencil.dev",
		"a":       "stencil-system/stencil.stencil.dev-a",
	} {
		if got := leases.LeaseFor(holder).String(); got != want {
			t.Errorf("leaseFor(%q) = %s, want %s", holder, got, want)
		}
	}
}
