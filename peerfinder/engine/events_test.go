package engine

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/peerfinder/events"
	"github.com/flockd/flock/peerfinder/membership"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
)

// The engine says the first delivery and a sink failing and recovering as
// Events, where it decides them: a failing sink is one SinkFailing however
// often it is retried, its success a SinkRecovered, and only the first
// delivery a PeersDelivered (with its size, generation and role).
func TestEngineEmitsEvents(t *testing.T) {
	src := chanSource{in: make(chan []peer.Peer)}
	var firstFails atomic.Bool
	firstFails.Store(true)
	rec := &recorder{events: make(chan sink.Delivery, 100), fail: func(d sink.Delivery) bool {
		return d.Generation == 1 && firstFails.Load() || d.Generation == 3
	}}
	evs := &events.Recording{}
	e := New(Config{
		Sources:    []NamedSource{{"test", src}},
		Sinks:      []NamedSink{{"hook", rec}},
		Membership: membership.Options{Self: self},
		Role:       func(context.Context, peer.Set, string) (string, string, error) { return "form", self, nil },
		RetryMin:   time.Millisecond, RetryMax: 2 * time.Millisecond,
		Events: evs,
	})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error)
	go func() { errc <- e.Run(ctx) }()

	await.Send(t, src.in, names("web-0", "web-1"), "the first set")
	await.Recv(t, rec.events, "the first attempt")
	await.Recv(t, rec.events, "a retry of the first set")
	firstFails.Store(false)
	want := []events.Reason{events.ReasonSinkFailing, events.ReasonSinkRecovered, events.ReasonPeersDelivered}
	await.Until(t, func() bool { return len(evs.Events()) >= 3 }, "three events; got %v", evs)
	if got := evs.Events(); !slices.Equal(events.Reasons(got), want) ||
		got[0] != events.SinkFailing("hook", errors.New("boom")) || got[1] != events.SinkRecovered("hook") ||
		got[2] != events.PeersDelivered(2, 1, "form") {
		t.Fatalf("events %+v, want %v: one failing although retried, the recovery, the first delivery", got, want)
	}

	// Generation 2 is delivered (no Event), then 3 fails: the worker is
	// serial, so once that failure is said, generation 2's delivery was too.
	await.Send(t, src.in, names("web-0", "web-1", "web-2"), "a second set")
	for await.Recv(t, rec.events, "the delivery of generation 2").Generation != 2 {
	}
	await.Send(t, src.in, names("web-0"), "a third set")
	await.Until(t, func() bool { return len(evs.Events()) >= 4 }, "a fourth event; got %v", evs)
	want = append(want, events.ReasonSinkFailing)
	if got := events.Reasons(evs.Events()); !slices.Equal(got, want) {
		t.Errorf("events %v, want %v: a later delivery is no Event", got, want)
	}
	cancel()
	if err := await.Recv(t, errc, "Run to return after cancel"); err != nil {
		t.Fatal(err)
	}
}
