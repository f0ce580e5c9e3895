package peerfinder

import (
	"context"
	"errors"

	"github.com/flockd/flock/peerfinder/engine"
	"github.com/flockd/flock/peerfinder/sink"
)

// runPipeline runs the engine together with every sink that implements
// sink.Runner (Lease campaigns, hosts-file keepers, the supervised
// command), following the Runner contract: the first part to return before
// ctx is done decides the outcome and the others are cancelled with the
// cause sink.ErrStopped; after ctx is done every part is waited for, and a
// runner's error then (the command's exit after a forwarded SIGTERM) is the
// outcome. The engine's nil on cancellation decides nothing.
func runPipeline(ctx context.Context, eng *engine.Engine, sinks []engine.NamedSink) error {
	parts := []func(context.Context) error{eng.Run}
	for _, s := range sinks {
		if r, ok := s.Sink.(sink.Runner); ok {
			parts = append(parts, r.Run)
		}
	}
	return runParts(ctx, parts)
}

// runParts runs the parts concurrently and returns the outcome described
// at runPipeline once all of them have returned.
func runParts(ctx context.Context, parts []func(context.Context) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(sink.ErrStopped)
	results := make(chan error, len(parts))
	for _, run := range parts {
		go func() { results <- run(ctx) }()
	}
	var outcome error
	decided := false
	for range parts {
		err := <-results
		if !decided && (ctx.Err() == nil || err != nil && !errors.Is(err, context.Canceled)) {
			outcome, decided = err, true
		}
		cancel(sink.ErrStopped)
	}
	return outcome
}
