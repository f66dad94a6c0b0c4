package testutil

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NewNamespace creates, with c, a namespace of the test's own, named after
// the test.
func NewNamespace(t testing.TB, c client.Client) string {
	t.Helper()
	ns := &corev1.Namespace{}
	ns.GenerateName = strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	if len(ns.GenerateName) > 40 {
		ns.GenerateName = ns.GenerateName[:40]
	}
	ns.GenerateName += "-"
	if err := c.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}
