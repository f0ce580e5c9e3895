package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/flockd/flock/internal/retry"
	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/peerfinder/membership"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
)

func TestStep(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	view := func(ns ...string) []membership.View {
		return []membership.View{{Source: "dns", Reported: true, Peers: names(ns...)}}
	}
	missingWeb1 := func(set peer.Set) []string {
		if set.Has("web-1.web.ns.svc.cluster.local") {
			return nil
		}
		return []string{"web-1"}
	}
	type call struct {
		views       []membership.View
		opts        membership.Options
		at          time.Duration
		wantReason  membership.Reason
		wantPublish bool
		wantGen     uint64
		wantLog     bool
		wantPreview bool
	}
	tests := []struct {
		name  string
		calls []call
	}{
		{"source not reported holds", []call{
			{views: []membership.View{{Source: "dns"}}, opts: membership.Options{Self: self}, wantReason: membership.WaitSources, wantLog: true},
		}},
		{"first set publishes generation 1, the same set again does not, a change does", []call{
			{views: view("web-0"), opts: membership.Options{Self: self}, wantReason: membership.Publish, wantPublish: true, wantGen: 1, wantLog: true},
			{views: view("web-0"), opts: membership.Options{Self: self}, wantReason: membership.Publish, wantGen: 1},
			{views: view("web-0", "web-1"), opts: membership.Options{Self: self}, wantReason: membership.Publish, wantPublish: true, wantGen: 2, wantLog: true},
		}},
		{"a held set keeps the generation", []call{
			{views: view("web-0"), opts: membership.Options{Self: self}, wantReason: membership.Publish, wantPublish: true, wantGen: 1, wantLog: true},
			{views: view("web-1"), opts: membership.Options{Self: self}, wantReason: membership.WaitSelf, wantGen: 1, wantLog: true},
		}},
		{"stable-for holds until the clock passes it", []call{
			{views: view("web-0"), opts: membership.Options{Self: self, StableFor: time.Second}, wantReason: membership.WaitStable, wantLog: true},
			{views: view("web-0"), opts: membership.Options{Self: self, StableFor: time.Second}, at: time.Second, wantReason: membership.Publish, wantPublish: true, wantGen: 1, wantLog: true},
		}},
		{"the names gate holds the first publish only, previewing each held set once", []call{
			{views: view("web-0"), opts: membership.Options{Self: self, Missing: missingWeb1}, wantReason: membership.WaitNames, wantLog: true, wantPreview: true},
			{views: view("web-0"), opts: membership.Options{Self: self, Missing: missingWeb1}, wantReason: membership.WaitNames},
			{views: view("web-0", "web-2"), opts: membership.Options{Self: self, Missing: missingWeb1}, wantReason: membership.WaitNames, wantLog: true, wantPreview: true},
			{views: view("web-0", "web-1"), opts: membership.Options{Self: self, Missing: missingWeb1}, wantReason: membership.Publish, wantPublish: true, wantGen: 1, wantLog: true},
			{views: view("web-0"), opts: membership.Options{Self: self, Missing: missingWeb1}, wantReason: membership.Publish, wantPublish: true, wantGen: 2, wantLog: true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ev evaluator
			for i, c := range tt.calls {
				var out evaluation
				ev, out = step(ev, inputs{views: c.views, opts: c.opts}, t0.Add(c.at))
				if out.verdict.Reason != c.wantReason || out.publish != c.wantPublish || out.gen != c.wantGen || out.logVerdict != c.wantLog || out.preview != c.wantPreview {
					t.Fatalf("call %d: reason %s publish %v gen %d log %v preview %v; want %s %v %d %v %v",
						i, out.verdict.Reason, out.publish, out.gen, out.logVerdict, out.preview, c.wantReason, c.wantPublish, c.wantGen, c.wantLog, c.wantPreview)
				}
			}
		})
	}
}

func TestAfterRound(t *testing.T) {
	b := retry.Backoff{Min: time.Second, Max: 8 * time.Second, Jitter: func(d time.Duration) time.Duration { return d }}
	p := sink.Pending(errors.New("waiting for the writer"))
	for _, tt := range []struct {
		name         string
		err          error
		failures     int
		want         roundOutcome
		wantFailures int
		wantWait     time.Duration
	}{
		{"delivered resets", nil, 3, delivered, 0, 0},
		{"first failure", errors.New("boom"), 0, failed, 1, time.Second},
		{"third failure doubles twice", errors.New("boom"), 2, failed, 3, 4 * time.Second},
		{"capped", errors.New("boom"), 10, failed, 11, 8 * time.Second},
		{"pending waits the fixed interval and counts nothing", p, 2, pending, 2, sink.PendingInterval},
		{"pending and a failure is a failure", errors.Join(p, errors.New("boom")), 0, failed, 1, time.Second},
	} {
		o, f, w := afterRound(tt.err, tt.failures, b)
		if o != tt.want || f != tt.wantFailures || w != tt.wantWait {
			t.Errorf("%s: (%d, %d, %v), want (%d, %d, %v)", tt.name, o, f, w, tt.want, tt.wantFailures, tt.wantWait)
		}
	}
}

// The bootstrap timeout runs on the injected clock: no test waits for it.
func TestBootstrapTimeoutOnInjectedClock(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	src := chanSource{in: make(chan []peer.Peer)}
	e := New(Config{
		Sources:          []NamedSource{{"test", src}},
		Sinks:            []NamedSink{{"rec", &recorder{}}},
		Membership:       membership.Options{Self: self},
		BootstrapTimeout: 10 * time.Minute,
		Clock:            clk,
	})
	errc := make(chan error, 1)
	go func() { errc <- e.Run(context.Background()) }()
	await.Until(t, func() bool { return clk.HasWaiters() }, "the engine to arm its bootstrap timer")
	clk.Step(10 * time.Minute)
	if err := await.Recv(t, errc, "Run to give up at the bootstrap timeout"); !errors.Is(err, ErrBootstrapTimeout) {
		t.Fatalf("Run = %v, want ErrBootstrapTimeout", err)
	}
}
