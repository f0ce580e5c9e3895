// Package sink defines how peers reach the application. Each subpackage
// implements Sink for one output (hook scripts, hosts file, JSON file, exec).
package sink

import (
	"context"
	"errors"
	"time"

	"github.com/flockd/flock/peerfinder/peer"
)

// Delivery is what a sink receives: the whole current set and its context.
type Delivery struct {
	// Set is the complete, gated peer set. It is never empty and always
	// contains Self.
	Set peer.Set
	// Self is the key (FQDN) of this member.
	Self string
	// Generation counts the distinct sets published by the engine, from 1.
	Generation uint64
	// First is true until this sink has applied a delivery successfully.
	First bool
	// Added and Removed are the keys changed since this sink's last
	// successful Apply (all keys are Added on the first delivery).
	Added, Removed []string
	// Bootstrap is "form" or "join" when a bootstrap role is known, else "".
	Bootstrap string
	// Former is the key (FQDN) of the member that formed the cluster (or
	// forms it: Self when Bootstrap is "form"), the member joiners target;
	// "" when unknown.
	Former string
}

// Sink applies a peer set to the outside world.
//
// The engine calls Apply with the whole current set, never concurrently,
// only when the set changed since the sink's last successful Apply. Apply
// must be idempotent. On error the engine retries with backoff, always with
// the newest set (which may differ from the one that failed). Apply should
// return promptly when ctx is done.
type Sink interface {
	Apply(ctx context.Context, d Delivery) error
}

// Blocking is an optional capability of a Sink: HoldsBack reports whether
// a failure of the sink holds back the sinks after it (they wait until it
// succeeds). A sink that does not implement Blocking holds them back, since
// what it does may be their input (files a hook reads, an on-start hook
// before the command). Either way the failing sink is retried with the
// newest set. (Membership's gates decide whether a set is delivered at
// all; this decides only the order of sinks when one fails.)
type Blocking interface {
	HoldsBack() bool
}

// Runner is an optional capability of a Sink: work that lives beside Apply
// for the whole run (a Lease campaign, keeping a file's block in place,
// supervising a child process). A sink that implements Runner works only
// while its Run runs.
//
// The composition root calls Run once, in its own goroutine, concurrently
// with the engine (so possibly after the first Apply) and the other
// runners, with a context that ends when peer-finder stops. Run blocks
// until its work is over. The first part (engine or runner) that returns
// before that context is done decides peer-finder's outcome, and the
// others are cancelled with the cause ErrStopped and waited for; an error
// with an ExitStatus() int method sets the exit status. After the context
// is done the root waits for every runner, and a runner that returns a
// non-nil error then (a child that exited after a forwarded SIGTERM)
// decides the outcome.
type Runner interface {
	Run(ctx context.Context) error
}

// Warner is an optional capability of a Sink whose Runner finds problems
// that no Apply reports (a file's block rewritten by another writer):
// Warnings returns the current ones, one line each, none when all is well.
// It is safe for concurrent use. /readyz lists them; they do not make
// peer-finder unready, since the set was delivered.
type Warner interface {
	Warnings() []string
}

// ErrStopped is the cause (context.Cause) of a Runner's context when
// another part of the pipeline ended first. A runner that supervises
// something outside stops it on this cause; any other cancellation comes
// from outside (a signal peer-finder received, which such a runner
// forwards), and the runner lets its child end on its own terms.
var ErrStopped = errors.New("pipeline stopped")

// PendingInterval is how often the engine calls Apply again after a
// pending result: fixed, with no backoff, since the wait ends by itself.
const PendingInterval = 250 * time.Millisecond

// Previewer is an optional Sink that shows a set the expected-names gate
// still holds (every expected name is known, some have no address yet): the
// hosts file lists the expected names, as comments until their address is
// known, before the job starts. Preview is called with Generation 0, only
// before the first Apply and never concurrently with it; an error is logged
// and the next held set is previewed again. Delivery (hooks, init mode's
// exit, the -- command) still waits for the gate.
type Previewer interface {
	Preview(ctx context.Context, d Delivery) error
}

// PendingError is an Apply result that means "not yet", not a failure:
// something outside the peer set that will come by itself is missing (a
// follower waiting for the shared file's writer). The engine counts no
// failure and logs no warning; it holds back the sinks after this one,
// marks the sink pending in its status, and calls Apply again with the
// newest set every PendingInterval. Err says what is awaited.
type PendingError struct {
	Err error
}

// Pending wraps err as a pending result.
func Pending(err error) error { return &PendingError{Err: err} }

func (e *PendingError) Error() string { return "pending: " + e.Err.Error() }
func (e *PendingError) Unwrap() error { return e.Err }

// IsPending reports whether err is (or wraps) a pending result.
func IsPending(err error) bool {
	var p *PendingError
	return errors.As(err, &p)
}
