// Package await has the waits of tests: each has a deadline and fails the
// test with a message naming what it waited for, so a regression makes a
// test fail in seconds instead of hanging until go test's 10-minute timeout.
//
// The deadline is generous (Timeout): it bounds a hang, it does not assert
// how fast anything is.
package await

import (
	"cmp"
	"errors"
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
	Poll{}.Until(t, ok, what, args...)
}

// Check polls check every few milliseconds until it returns nil, or fails
// the test after Timeout naming what and check's last error: the last state
// observed, so the failure says how far things got.
func Check(t testing.TB, check func() error, what string, args ...any) {
	t.Helper()
	Poll{}.Check(t, check, what, args...)
}

// Poll is a wait with its own deadline and pace, for what is slower than a
// process on this machine (a cluster, a pod, an authorizer's watch) or is
// costly to look at. The zero Poll is Until's and Check's: Timeout, every
// 5ms.
type Poll struct {
	Timeout time.Duration // how long before the test fails; 0 is Timeout
	Every   time.Duration // the pause between two looks; 0 is 5ms
}

// Until polls ok until it returns true, or fails the test naming what
// after p's timeout.
func (p Poll) Until(t testing.TB, ok func() bool, what string, args ...any) {
	t.Helper()
	p.Check(t, func() error {
		if ok() {
			return nil
		}
		return errNotYet
	}, what, args...)
}

// Check polls check until it returns nil, or fails the test after p's
// timeout naming what and check's last error.
func (p Poll) Check(t testing.TB, check func() error, what string, args ...any) {
	t.Helper()
	timeout, every := cmp.Or(p.Timeout, Timeout), cmp.Or(p.Every, 5*time.Millisecond)
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			if errors.Is(err, errNotYet) {
				t.Fatalf("waited %s for %s", timeout, fmt.Sprintf(what, args...))
			}
			t.Fatalf("waited %s for %s: %v", timeout, fmt.Sprintf(what, args...), err)
		}
		time.Sleep(every)
	}
}

// errNotYet is Until's condition not holding: nothing more to say.
var errNotYet = errors.New("not yet")
