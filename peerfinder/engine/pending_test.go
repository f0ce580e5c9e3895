package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/peerfinder/membership"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
	"github.com/flockd/flock/peerfinder/source/static"
)

// waiter is a sink that is pending until release is closed.
type waiter struct {
	release chan struct{}
	mu      sync.Mutex
	calls   int
}

func (w *waiter) Apply(context.Context, sink.Delivery) error {
	w.mu.Lock()
	w.calls++
	w.mu.Unlock()
	select {
	case <-w.release:
		return nil
	default:
		return sink.Pending(errors.New("the writer's file is not complete"))
	}
}

// A pending sink is waiting, not failing (issue 12 #2): it is re-checked
// at the fixed PendingInterval without backoff, shown as pending (never
// failing) in Status, holds back the sinks after it, and the delivery
// completes as soon as it stops waiting.
func TestPendingIsNotAFailure(t *testing.T) {
	w := &waiter{release: make(chan struct{})}
	rec := &recorder{events: make(chan sink.Delivery, 1)}
	e := New(Config{
		Sources:    []NamedSource{{"static", static.Source{Peers: names("web-0")}}},
		Sinks:      []NamedSink{{"follower", w}, {"hook", rec}},
		Membership: membership.Options{Self: self},
		Once:       true,
		RetryMin:   time.Hour, RetryMax: time.Hour, // a failure would wait an hour
	})
	errc := make(chan error, 1)
	go func() { errc <- e.Run(t.Context()) }()
	st := waitStatus(t, e, func(s Status) bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.calls >= 3 // re-checked twice: no backoff of an hour
	})
	if s := st.Sinks[0]; !s.Pending || s.Failing {
		t.Errorf("follower status %+v, want pending, not failing", s)
	}
	if len(rec.got) != 0 {
		t.Fatalf("the hook ran while the follower was pending")
	}
	close(w.release)
	d := await.Recv(t, rec.events, "the hook after the follower stopped waiting")
	if d.Generation != 1 {
		t.Errorf("delivery %+v", d)
	}
	if err := await.Recv(t, errc, "Run to return after the first delivery"); err != nil {
		t.Fatal(err)
	}
	if s := e.Status().Sinks[0]; s.Pending || s.Failing {
		t.Errorf("follower status after release %+v", s)
	}
}

func TestOnlyPending(t *testing.T) {
	p := sink.Pending(errors.New("wait"))
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{p, true},
		{errors.Join(p, sink.Pending(errors.New("other"))), true},
		{errors.Join(p, errors.New("boom")), false},
		{errors.New("boom"), false},
	} {
		if got := onlyPending(tt.err); got != tt.want {
			t.Errorf("onlyPending(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// The expected-names gate holds the first publish only: a later set that
// lacks an expected name (a retried pod) is still delivered.
func TestNamesGateHoldsTheFirstPublishOnly(t *testing.T) {
	src := chanSource{in: make(chan []peer.Peer)}
	rec := &recorder{events: make(chan sink.Delivery, 4)}
	want := map[string]bool{"web-0.web.ns.svc.cluster.local": true, "web-1.web.ns.svc.cluster.local": true}
	missing := func(set peer.Set) []string {
		var out []string
		for n := range want {
			if !set.Has(n) {
				out = append(out, n)
			}
		}
		return out
	}
	e := New(Config{
		Sources:    []NamedSource{{"test", src}},
		Sinks:      []NamedSink{{"rec", rec}},
		Membership: membership.Options{Self: self, Missing: missing},
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- e.Run(ctx) }()
	await.Send(t, src.in, names("web-0"), "a set without web-1")
	if v := waitStatus(t, e, func(s Status) bool { return s.Verdict.Reason == membership.WaitNames }); v.Generation != 0 {
		t.Fatalf("published generation %d while an expected name was missing", v.Generation)
	}
	await.Send(t, src.in, names("web-0", "web-1"), "the complete set")
	if d := await.Recv(t, rec.events, "the first delivery"); d.Set.Len() != 2 {
		t.Fatalf("first delivery %+v", d)
	}
	await.Send(t, src.in, names("web-0"), "web-1 gone again")
	if d := await.Recv(t, rec.events, "the second delivery"); d.Set.Len() != 1 {
		t.Fatalf("second delivery %+v", d)
	}
	cancel()
	if err := await.Recv(t, errc, "Run to return"); err != nil {
		t.Fatal(err)
	}
}
