// Package processtest runs several stencil processes, one after the other
// or side by side, on one local control plane: restarts and shards (its
// tests; the package itself is empty).
package processtest
