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

// Settle waits until count (of requests sent, of reconciles done) has
// stayed the same for quiet: what the system under test was busy with has
// ended, however long a loaded machine takes to end it. Use it instead of
// a sleep before a window in which nothing may happen. It fails the test
// once within has passed with count still changing: a system that never
// goes quiet is what such a window looks for.
func Settle(t testing.TB, within, quiet time.Duration, what string, count func() int) {
	t.Helper()
	deadline := time.Now().Add(within)
	last, since := count(), time.Now()
	for time.Since(since) < quiet {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not settled within %s: still changing (%d), want it unchanged for %s", what, within, last, quiet)
		}
		time.Sleep(100 * time.Millisecond)
		if n := count(); n != last {
			last, since = n, time.Now()
		}
	}
}
