// Package retry is the one retry schedule of flock's daemons: an
// exponential backoff with equal jitter, and Do, a loop that retries a
// function with it until it succeeds or its context ends.
package retry

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Backoff is an exponential schedule: the pause after the n-th failure in a
// row is Min·2^(n-1), capped at Max, then jittered. The zero value of a
// field takes its default.
type Backoff struct {
	// Min is the pause after the first failure (default 1s).
	Min time.Duration
	// Max caps the pause (default 30s); a Max below Min is raised to Min.
	Max time.Duration
	// Jitter maps the capped pause d to the pause taken. nil means equal
	// jitter: uniform in [d/2, d], so members that fail together do not
	// retry in lockstep and no pause exceeds Max. Tests set it to identity.
	Jitter func(d time.Duration) time.Duration
}

// Defaults for the zero fields of Backoff.
const (
	DefaultMin = time.Second
	DefaultMax = 30 * time.Second
)

// Delay returns the pause after n failures in a row; 0 when n <= 0.
func (b Backoff) Delay(n int) time.Duration {
	if n <= 0 {
		return 0
	}
	lo := b.Min
	if lo <= 0 {
		lo = DefaultMin
	}
	hi := b.Max
	if hi <= 0 {
		hi = DefaultMax
	}
	hi = max(hi, lo)
	d := lo
	for i := 1; i < n && d < hi; i++ {
		d *= 2 // d < hi here, so d*2 cannot overflow before the cap
	}
	d = min(d, hi)
	if b.Jitter != nil {
		return b.Jitter(d)
	}
	return EqualJitter(d)
}

// EqualJitter returns a pause uniform in [d/2, d].
func EqualJitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return wait.Jitter(d/2, 1) // d/2 + [0, d/2)
}

// Sleep pauses for d or until ctx ends, and returns ctx.Err() in that case.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Do calls fn until it returns nil, pausing b.Delay(n) after the n-th
// failure; onErr, when not nil, sees each failure and the pause before the
// next try (to log or count it). Do returns nil when fn succeeded and
// ctx.Err() when ctx ended first; fn's errors are never returned, so a
// caller that must stop on some error returns it through its own variable
// and nil from fn.
func Do(ctx context.Context, b Backoff, fn func(ctx context.Context) error, onErr func(err error, retryIn time.Duration)) error {
	for n := 1; ; n++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := fn(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		d := b.Delay(n)
		if onErr != nil {
			onErr(err, d)
		}
		if err := Sleep(ctx, d); err != nil {
			return err
		}
	}
}
