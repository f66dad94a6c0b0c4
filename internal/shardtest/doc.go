// Package shardtest runs stencil as several shards on one local control
// plane (its tests; the package itself is empty).
package shardtest
