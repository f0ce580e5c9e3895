package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/peerfinder/membership"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
)

// TestBootstrapTimeoutNeverFiresAfterDelivery runs the engine as a sidecar
// (not Once) with a bootstrap timeout: the first set is delivered in time,
// so when the timeout passes the engine keeps running and keeps delivering.
// The timeout passes on an injected clock, and the second delivery, made
// after it, shows that the engine saw it pass and kept running.
func TestBootstrapTimeoutNeverFiresAfterDelivery(t *testing.T) {
	const timeout = 100 * time.Millisecond
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	src := chanSource{in: make(chan []peer.Peer)}
	rec := &recorder{events: make(chan sink.Delivery, 10)}
	e := New(Config{
		Sources:          []NamedSource{{"test", src}},
		Sinks:            []NamedSink{{"rec", rec}},
		Membership:       membership.Options{Self: self},
		BootstrapTimeout: timeout,
		Clock:            clk,
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- e.Run(ctx) }()

	await.Send(t, src.in, names("web-0"), "the first set")
	if d := await.Recv(t, rec.events, "the first delivery"); d.Generation != 1 {
		t.Fatalf("first delivery has generation %d", d.Generation)
	}
	clk.Step(3 * timeout) // the timeout passes with the engine idle
	select {
	case err := <-errc:
		t.Fatalf("Run returned %v after the first set was delivered in time", err)
	case src.in <- names("web-0", "web-1"):
	case <-time.After(await.Timeout):
		t.Fatal("the source never took the second set")
	}
	select {
	case err := <-errc:
		t.Fatalf("Run returned %v after the first set was delivered in time", err)
	case d := <-rec.events:
		if d.Generation != 2 || d.Set.Len() != 2 {
			t.Fatalf("second delivery = generation %d with %v", d.Generation, d.Set.Keys())
		}
	case <-time.After(await.Timeout):
		t.Fatal("no second delivery")
	}
	cancel()
	if err := await.Recv(t, errc, "Run to return after cancel"); err != nil {
		t.Fatalf("Run() = %v after cancel, want nil", err)
	}
}

// lingeringSource returns from Run a little after its context ends, and
// records that it did.
type lingeringSource struct{ returned *atomic.Bool }

func (s lingeringSource) Run(ctx context.Context, up chan<- []peer.Peer) error {
	select {
	case up <- names("web-0"):
	case <-ctx.Done():
	}
	<-ctx.Done()
	time.Sleep(50 * time.Millisecond)
	s.returned.Store(true)
	return nil
}

// TestRunWaitsForItsSources checks Run's contract that it waits for its
// goroutines: when it returns, every source's Run has returned too, so a
// caller that exits next does not cut a source (or sink) off midway.
func TestRunWaitsForItsSources(t *testing.T) {
	var returned atomic.Bool
	e := New(Config{
		Sources:    []NamedSource{{"slow", lingeringSource{&returned}}},
		Sinks:      []NamedSink{{"rec", &recorder{}}},
		Membership: membership.Options{Self: self},
		Once:       true,
	})
	if err := run(t, e); err != nil {
		t.Fatal(err)
	}
	if !returned.Load() {
		t.Error("Run returned before its source's Run did")
	}
}

// TestIdleWithoutInput: once a set is delivered and nothing changes, the
// engine does not wake up (no recheck timer of zero, no busy loop). The
// clock counts its wakeups: each pass of the loop reads it.
func TestIdleWithoutInput(t *testing.T) {
	var reads atomic.Int64
	src := chanSource{in: make(chan []peer.Peer)}
	rec := &recorder{events: make(chan sink.Delivery, 10)}
	e := New(Config{
		Sources:    []NamedSource{{"test", src}},
		Sinks:      []NamedSink{{"rec", rec}},
		Membership: membership.Options{Self: self},
		Now:        func() time.Time { reads.Add(1); return time.Now() },
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- e.Run(ctx) }()
	await.Send(t, src.in, names("web-0"), "the first set")
	await.Recv(t, rec.events, "the first delivery")
	waitStatus(t, e, func(s Status) bool { return s.Delivered }) // no clock reads after this without Metrics
	before := reads.Load()
	time.Sleep(200 * time.Millisecond)
	if n := reads.Load() - before; n != 0 {
		t.Errorf("the engine woke up %d times in 200ms without any input, want 0", n)
	}
	cancel()
	if err := await.Recv(t, errc, "Run to return after cancel"); err != nil {
		t.Fatal(err)
	}
}
