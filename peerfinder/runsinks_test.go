package peerfinder

import (
	"context"
	"errors"
	"testing"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/peerfinder/sink"
)

type exitErr int

func (e exitErr) Error() string   { return "exited" }
func (e exitErr) ExitStatus() int { return int(e) }

// runParts follows the sink.Runner contract: the first part to return
// before ctx is done decides and the others see the cause ErrStopped; after
// an outside cancellation the nil returns decide nothing and a runner's
// error (the command's exit) is the outcome.
func TestRunPartsOutcome(t *testing.T) {
	boom := errors.New("bootstrap timeout")
	untilDone := func(seen chan<- error) func(context.Context) error {
		return func(ctx context.Context) error {
			<-ctx.Done()
			seen <- context.Cause(ctx)
			return nil
		}
	}

	seen := make(chan error, 1)
	got := runParts(context.Background(), []func(context.Context) error{
		func(context.Context) error { return boom }, untilDone(seen),
	})
	if !errors.Is(got, boom) {
		t.Errorf("first part failed: outcome %v, want %v", got, boom)
	}
	if cause := await.Recv(t, seen, "the other part's cause"); !errors.Is(cause, sink.ErrStopped) {
		t.Errorf("other part cancelled with cause %v, want sink.ErrStopped", cause)
	}

	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("SIGTERM received"))
	got = runParts(ctx, []func(context.Context) error{
		func(ctx context.Context) error { <-ctx.Done(); return nil }, // the engine
		func(ctx context.Context) error { <-ctx.Done(); return exitErr(143) },
	})
	var ex interface{ ExitStatus() int }
	if !errors.As(got, &ex) || ex.ExitStatus() != 143 {
		t.Errorf("after a signal: outcome %v, want the command's exit status 143", got)
	}

	if got := runParts(ctx, []func(context.Context) error{
		func(ctx context.Context) error { return nil }, untilDone(make(chan error, 1)),
	}); got != nil {
		t.Errorf("all stopped on a signal: outcome %v, want nil", got)
	}
}
