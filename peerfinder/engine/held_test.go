package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/internal/testing/logtest"
	"github.com/flockd/flock/peerfinder/membership"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
)

// heldRun starts an engine with an expected size whose only sink fails
// while failing is set, publishes three peers at size 3, sees the first
// attempt fail, then grows the size to 5 and waits until the engine holds
// the retry. Campaign run 20, round 88: the on-change hook failed on 3
// peers, the StatefulSet was scaled to 5, the retry re-delivered the 3
// peers, and the hook removed the member etcd-3 had just added.
func heldRun(t *testing.T) (e *Engine, src chanSource, size chanSize, rec *recorder, setFailing func(bool)) {
	src = chanSource{in: make(chan []peer.Peer)}
	size = chanSize{in: make(chan int), err: make(chan error)}
	var mu sync.Mutex
	failing := true
	setFailing = func(f bool) { mu.Lock(); failing = f; mu.Unlock() }
	rec = &recorder{events: make(chan sink.Delivery, 1000), fail: func(sink.Delivery) bool {
		mu.Lock()
		defer mu.Unlock()
		return failing
	}}
	logs := logtest.New()
	e = New(Config{
		Sources:    []NamedSource{{"test", src}},
		Sinks:      []NamedSink{{"hook", rec}},
		Membership: membership.Options{Self: self},
		Expect:     size,
		RetryMin:   time.Millisecond, RetryMax: 5 * time.Millisecond,
		Logger: logs.Logger(),
	})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		for { // a blocked Apply must not keep Run from returning
			select {
			case <-errc:
				return
			case <-rec.events:
			}
		}
	})

	await.Send(t, size.in, 3, "the size 3")
	await.Send(t, src.in, names("web-0", "web-1", "web-2"), "three peers")
	await.Recv(t, rec.events, "the first, failing attempt")
	await.Send(t, size.in, 5, "the size 5")
	waitVerdict(t, e, membership.WaitSize, 5)
	waitStatus(t, e, func(Status) bool {
		held := logs.Find("delivery held: the expected size outgrew the set")
		return len(held) > 0 && held[0].Attrs["need"] == "5"
	})
	if !e.Status().Held {
		t.Fatal("Status().Held = false while the delivery is held")
	}
	for len(rec.events) > 0 { // attempts that began before the hold
		<-rec.events
	}
	return e, src, size, rec, setFailing
}

// A failed set smaller than the expected size that has since grown is not
// retried: the next delivery is the first set that passes the size gate.
func TestRetryHeldWhileExpectedSizeExceedsSet(t *testing.T) {
	e, src, _, rec, setFailing := heldRun(t)
	setFailing(false)
	await.Send(t, src.in, names("web-0", "web-1", "web-2", "web-3", "web-4"), "five peers")
	if d := await.Recv(t, rec.events, "the delivery of five peers"); d.Set.Len() != 5 || d.Generation != 2 {
		t.Fatalf("next attempt = generation %d with %v, want generation 2 with five peers", d.Generation, d.Set.Keys())
	}
	if got := rec.delivered(); len(got) != 1 || got[0].Set.Len() != 5 {
		t.Fatalf("deliveries = %v, want one of five peers", got)
	}
	if st := waitStatus(t, e, func(s Status) bool { return s.Last.Generation == 2 }); st.Held {
		t.Error("Status().Held = true after the hold was released")
	}
}

// A held retry resumes when the expected size shrinks back to the set's.
func TestHeldRetryResumesWhenExpectedSizeShrinks(t *testing.T) {
	_, _, size, rec, setFailing := heldRun(t)
	setFailing(false)
	await.Send(t, size.in, 3, "the size 3 again")
	if d := await.Recv(t, rec.events, "the retry of three peers"); d.Set.Len() != 3 || d.Generation != 1 {
		t.Fatalf("retry = generation %d with %v, want generation 1 with three peers", d.Generation, d.Set.Keys())
	}
}
