// Package testutil holds helpers shared by stencil's integration and e2e
// tests.
package testutil

import (
	"testing"
	"time"
)

// Eventually polls check until it returns nil, and fails the test with the
// last error once within has passed. Use it instead of sleeps.
func Eventually(t testing.TB, within time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true within %s: %v", what, within, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
