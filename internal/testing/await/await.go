// Package await has the waits of tests: each has a deadline and fails the
// test with a message naming what it waited for, so a regression makes a
// test fail in seconds instead of hanging until go test's 10-minute timeout.
//
// The deadline is generous (Timeout): it bounds a hang, it does not assert
// how fast anything is.
package await

import (
	"fmt"
	"testing"
	"time"
)

// Timeout is how long each wait lasts before it fails the test.
const Timeout = 30 * time.Second

// Recv returns the next value from ch, or fails the test naming what when
// none arrives within Timeout (or ch is closed).
func Recv[T any](t testing.TB, ch <-chan T, what string, args ...any) T {
	t.Helper()
	timer := time.NewTimer(Timeout)
	defer timer.Stop()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatalf("waiting for %s: channel closed", fmt.Sprintf(what, args...))
		}
		return v
	case <-timer.C:
		t.Fatalf("waited %s for %s", Timeout, fmt.Sprintf(what, args...))
	}
	panic("unreachable")
}

// Done waits until ch is closed or yields a value (a done or started
// channel), or fails the test naming what after Timeout.
func Done[T any](t testing.TB, ch <-chan T, what string, args ...any) {
	t.Helper()
	timer := time.NewTimer(Timeout)
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
		t.Fatalf("waited %s for %s", Timeout, fmt.Sprintf(what, args...))
	}
}

// Send sends v on ch, or fails the test naming what when nobody receives
// within Timeout.
func Send[T any](t testing.TB, ch chan<- T, v T, what string, args ...any) {
	t.Helper()
	timer := time.NewTimer(Timeout)
	defer timer.Stop()
	select {
	case ch <- v:
	case <-timer.C:
		t.Fatalf("waited %s to send %s", Timeout, fmt.Sprintf(what, args...))
	}
}

// Until polls ok every few milliseconds until it returns true, or fails
// the test naming what after Timeout.
func Until(t testing.TB, ok func() bool, what string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", Timeout, fmt.Sprintf(what, args...))
		}
		time.Sleep(5 * time.Millisecond)
	}
}
