package engine

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// writerKey carries, in a reconcile's context, the client that writes the
// resource's objects.
type writerKey struct{}

// WithWriter is ctx carrying c as the client that writes the resource's
// objects (see writer).
func WithWriter(ctx context.Context, c client.Client) context.Context {
	return context.WithValue(ctx, writerKey{}, c)
}

// writer is the client that writes the objects of the resource being
// reconciled: its ServiceAccount's, else fallback (stencil's).
func writer(ctx context.Context, fallback client.Client) client.Client {
	if c, ok := ctx.Value(writerKey{}).(client.Client); ok {
		return c
	}
	return fallback
}
