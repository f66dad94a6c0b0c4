// Package render turns a custom resource into the objects its kind's
// templates describe. It is pure: no Kubernetes client, no clock, no
// randomness; templates are data, parsed once at start-up.
package render
