package retry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flockd/flock/internal/testing/await"
)

func identity(d time.Duration) time.Duration { return d }

func TestDelay(t *testing.T) {
	b := Backoff{Min: time.Second, Max: 10 * time.Second, Jitter: identity}
	for n, want := range map[int]time.Duration{
		-1: 0, 0: 0, 1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second,
		4: 8 * time.Second, 5: 10 * time.Second, 64: 10 * time.Second, 1 << 30: 10 * time.Second,
	} {
		if got := b.Delay(n); got != want {
			t.Errorf("Delay(%d) = %v, want %v", n, got, want)
		}
	}
	if got := (Backoff{Jitter: identity}).Delay(1); got != DefaultMin {
		t.Errorf("zero Backoff: Delay(1) = %v, want %v", got, DefaultMin)
	}
	if got := (Backoff{Jitter: identity}).Delay(100); got != DefaultMax {
		t.Errorf("zero Backoff: Delay(100) = %v, want %v", got, DefaultMax)
	}
	if got := (Backoff{Min: time.Minute, Max: time.Second, Jitter: identity}).Delay(3); got != time.Minute {
		t.Errorf("Max below Min: Delay(3) = %v, want Min", got)
	}
}

// TestDelayJitterVaries checks that the default jitter is real: pauses for
// the same failure count differ between calls and spread over [d/2, d],
// so members whose lookups fail together do not retry in lockstep.
func TestDelayJitterVaries(t *testing.T) {
	b := Backoff{Min: time.Second, Max: 10 * time.Second}
	const d = 4 * time.Second // Delay(3): Min·2²
	seen := map[time.Duration]bool{}
	lo, hi := d, time.Duration(0)
	for range 200 {
		p := b.Delay(3)
		if p < d/2 || p > d {
			t.Fatalf("Delay(3) = %v, want it in [%v, %v]", p, d/2, d)
		}
		seen[p] = true
		lo, hi = min(lo, p), max(hi, p)
	}
	// 200 uniform draws over [2s, 4s]: fewer than 100 distinct values, or
	// none in the lowest or highest fifth, does not happen by chance.
	if len(seen) < 100 || lo > d*6/10 || hi < d*9/10 {
		t.Errorf("200 pauses: %d distinct, from %v to %v; want them spread over [%v, %v]", len(seen), lo, hi, d/2, d)
	}
}

func TestDo(t *testing.T) {
	var pauses []time.Duration
	calls := 0
	err := Do(context.Background(), Backoff{Min: time.Microsecond, Max: 4 * time.Microsecond, Jitter: identity},
		func(context.Context) error {
			if calls++; calls < 5 {
				return errors.New("not yet")
			}
			return nil
		},
		func(_ error, d time.Duration) { pauses = append(pauses, d) })
	if err != nil {
		t.Fatalf("Do = %v, want nil", err)
	}
	want := []time.Duration{time.Microsecond, 2 * time.Microsecond, 4 * time.Microsecond, 4 * time.Microsecond}
	if calls != 5 || len(pauses) != len(want) {
		t.Fatalf("calls %d, pauses %v; want 5 calls and pauses %v", calls, pauses, want)
	}
	for i := range want {
		if pauses[i] != want[i] {
			t.Errorf("pauses %v, want %v", pauses, want)
			break
		}
	}
}

func TestDoEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	started := make(chan struct{}, 1)
	go func() {
		done <- Do(ctx, Backoff{Min: time.Hour}, func(context.Context) error {
			select {
			case started <- struct{}{}:
			default:
			}
			return errors.New("fails")
		}, nil)
	}()
	await.Recv(t, started, "the first try")
	cancel()
	if err := await.Recv(t, done, "Do to return after cancel"); !errors.Is(err, context.Canceled) {
		t.Errorf("Do = %v, want context.Canceled", err)
	}
}
