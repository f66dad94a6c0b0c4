// Package reconciler is the one generic reconciler that serves every kind:
// render, server-side apply, prune by label, drift in status. It never
// touches text/template; it gets rendered objects from package render.
package reconciler
