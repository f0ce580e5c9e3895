// Package need ends a test that cannot get what it needs (root, the local
// cluster's real nodes) the same way everywhere: a skip that says why, or,
// under CI=true, a failure that says why, because CI must run every test.
// Each call is counted in $FLOCK_TEST_TALLY when it is set, so that "make
// test" can say at its end how many such tests ran and how many did not.
package need

import (
	"fmt"
	"os"
	"testing"
)

// Root returns if the test runs as root; otherwise it ends the test (see
// Unavailable) with "needs root " + what for.
func Root(t testing.TB, what string) {
	t.Helper()
	if os.Geteuid() == 0 {
		Ran(t, "root")
		return
	}
	Unavailable(t, "root", "needs root "+what+" (euid != 0)")
}

// Ran counts a test of kind that got what it needs.
func Ran(t testing.TB, kind string) { tally(t, kind+" ran "+t.Name()) }

// Unavailable ends a test of kind that cannot get what it needs: a skip,
// or under CI=true a failure, with why either way.
func Unavailable(t testing.TB, kind, why string) {
	t.Helper()
	tally(t, kind+" skipped "+t.Name()+": "+why)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: every test must run)", why)
	}
	t.Skip(why)
}

// tally appends a line to $FLOCK_TEST_TALLY.
func tally(t testing.TB, line string) {
	path := os.Getenv("FLOCK_TEST_TALLY")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Logf("tally: %v", err)
		return
	}
	defer f.Close()
	// One short write to an O_APPEND file: parallel tests' lines do not mix.
	if _, err := fmt.Fprintln(f, line); err != nil {
		t.Logf("tally: %v", err)
	}
}
