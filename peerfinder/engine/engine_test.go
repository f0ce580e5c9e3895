package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/peerfinder/membership"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
	"github.com/flockd/flock/peerfinder/source/static"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// chanSource forwards whatever the test sends on in.
type chanSource struct{ in chan []peer.Peer }

func (s chanSource) Run(ctx context.Context, up chan<- []peer.Peer) error {
	for {
		select {
		case ps := <-s.in:
			select {
			case up <- ps:
			case <-ctx.Done():
				return nil
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// recorder is a sink that records deliveries and fails while fail is true.
type recorder struct {
	mu     sync.Mutex
	got    []sink.Delivery
	fail   func(d sink.Delivery) bool
	events chan sink.Delivery
	log    *[]string // shared across sinks to check order
	name   string
}

func (r *recorder) Apply(_ context.Context, d sink.Delivery) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.log != nil {
		*r.log = append(*r.log, fmt.Sprintf("%s:%d", r.name, d.Generation))
	}
	failed := r.fail != nil && r.fail(d)
	if !failed {
		r.got = append(r.got, d)
	}
	if r.events != nil {
		r.events <- d
	}
	if failed {
		return errors.New("boom")
	}
	return nil
}

const self = "web-0.web.ns.svc.cluster.local"

func names(n ...string) []peer.Peer {
	for i := range n {
		n[i] += ".web.ns.svc.cluster.local"
	}
	return static.Names(n...)
}

func TestOnceDeliversFirstSetAndReturns(t *testing.T) {
	rec := &recorder{}
	e := New(Config{
		Sources:    []NamedSource{{"static", static.Source{Peers: names("web-1", "web-0")}}},
		Sinks:      []NamedSink{{"rec", rec}},
		Membership: membership.Options{Self: self},
		Once:       true,
	})
	if err := run(t, e); err != nil {
		t.Fatal(err)
	}
	if len(rec.got) != 1 {
		t.Fatalf("got %d deliveries, want 1", len(rec.got))
	}
	d := rec.got[0]
	if !d.First || d.Generation != 1 || d.Self != self || !slices.Equal(d.Added, d.Set.Keys()) || d.Removed != nil {
		t.Errorf("delivery = %+v", d)
	}
	if !e.Status().Delivered {
		t.Errorf("status not delivered")
	}
}

// TestRoleAndFormerReachSinks: the role function's role and former are in
// every sink's delivery, and in Status.Last with the set delivered.
func TestRoleAndFormerReachSinks(t *testing.T) {
	rec := &recorder{}
	e := New(Config{
		Sources:    []NamedSource{{"static", static.Source{Peers: names("web-1", "web-0")}}},
		Sinks:      []NamedSink{{"rec", rec}},
		Membership: membership.Options{Self: self},
		Once:       true,
		Role: func(context.Context, peer.Set, string) (string, string, error) {
			return "join", "web-1.web.ns.svc.cluster.local", nil
		},
	})
	if err := run(t, e); err != nil {
		t.Fatal(err)
	}
	if len(rec.got) != 1 || rec.got[0].Bootstrap != "join" || rec.got[0].Former != "web-1.web.ns.svc.cluster.local" {
		t.Fatalf("deliveries = %+v, want one with role join and former web-1", rec.got)
	}
	last := e.Status().Last
	if last.Generation != 1 || !last.Set.Equal(rec.got[0].Set) || last.Role != "join" || last.Former != "web-1.web.ns.svc.cluster.local" || last.At.IsZero() {
		t.Errorf("Status().Last = %+v, want generation 1 with the delivered set, join, former web-1 and a time", last)
	}
}

// TestRoleFailureInStatus: while the role function fails, Status says why
// (pending or not) and nothing was delivered; once it succeeds the error
// clears and Last has the role.
func TestRoleFailureInStatus(t *testing.T) {
	results := make(chan error)
	e := New(Config{
		Sources:    []NamedSource{{"static", static.Source{Peers: names("web-1", "web-0")}}},
		Sinks:      []NamedSink{{"rec", &recorder{}}},
		Membership: membership.Options{Self: self},
		RetryMin:   time.Millisecond, RetryMax: time.Millisecond,
		Role: func(ctx context.Context, _ peer.Set, _ string) (string, string, error) {
			select {
			case err := <-results:
				if err != nil {
					return "", "", err
				}
				return "form", self, nil
			case <-ctx.Done():
				return "", "", ctx.Err()
			}
		},
	})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- e.Run(ctx) }()
	defer func() { cancel(); await.Recv(t, errc, "Run to return") }()

	await.Send(t, results, sink.Pending(errors.New("ranks awaited: db-1")), "a pending role")
	waitStatus(t, e, func(s Status) bool {
		return s.RolePending && strings.Contains(s.RoleErr, "ranks awaited: db-1") && s.Last.Generation == 0
	})
	await.Send(t, results, errors.New("lease: forbidden"), "a failing role")
	waitStatus(t, e, func(s Status) bool {
		return !s.RolePending && strings.Contains(s.RoleErr, "lease: forbidden") && s.Last.Generation == 0
	})
	await.Send(t, results, nil, "a role")
	st := waitStatus(t, e, func(s Status) bool { return s.Delivered })
	if st.RoleErr != "" || st.RolePending || st.Last.Role != "form" || st.Last.Former != self {
		t.Errorf("after delivery: RoleErr %q pending %v, Last %+v; want no error, role form by %s", st.RoleErr, st.RolePending, st.Last, self)
	}
}

func TestWaitsForSelfThenDeliversChanges(t *testing.T) {
	src := chanSource{in: make(chan []peer.Peer)}
	rec := &recorder{events: make(chan sink.Delivery, 10)}
	e := New(Config{
		Sources:    []NamedSource{{"test", src}},
		Sinks:      []NamedSink{{"rec", rec}},
		Membership: membership.Options{Self: self},
	})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error)
	go func() { errc <- e.Run(ctx) }()

	await.Send(t, src.in, names("web-1"), "a set without self")               // self missing: nothing delivered
	await.Send(t, src.in, names("web-0", "web-1"), "the first set with self") // delivered as generation 1
	d := await.Recv(t, rec.events, "the first delivery")
	if d.Generation != 1 || !d.First || d.Set.Len() != 2 {
		t.Fatalf("first delivery = %+v", d)
	}
	await.Send(t, src.in, names("web-0", "web-1"), "the same set again") // unchanged: nothing
	await.Send(t, src.in, names("web-0", "web-2"), "a changed set")
	d = await.Recv(t, rec.events, "the second delivery")
	if d.Generation != 2 || d.First || !slices.Equal(d.Added, []string{"web-2.web.ns.svc.cluster.local"}) ||
		!slices.Equal(d.Removed, []string{"web-1.web.ns.svc.cluster.local"}) {
		t.Fatalf("second delivery = %+v", d)
	}
	await.Send(t, src.in, nil, "an empty set") // authoritative empty: never delivered
	if v := waitStatus(t, e, func(s Status) bool { return s.Verdict.Reason == membership.WaitEmpty }); v.Generation != 2 {
		t.Errorf("generation after empty = %d", v.Generation)
	}
	cancel()
	if err := await.Recv(t, errc, "Run to return after cancel"); err != nil {
		t.Fatal(err)
	}
	if len(rec.events) != 0 {
		t.Errorf("unexpected delivery %+v", <-rec.events)
	}
}

func TestFailingSinkIsRetriedWithNewestSet(t *testing.T) {
	src := chanSource{in: make(chan []peer.Peer)}
	var mu sync.Mutex
	failing := true
	rec := &recorder{events: make(chan sink.Delivery, 100), fail: func(sink.Delivery) bool {
		mu.Lock()
		defer mu.Unlock()
		return failing
	}}
	e := New(Config{
		Sources:    []NamedSource{{"test", src}},
		Sinks:      []NamedSink{{"rec", rec}},
		Membership: membership.Options{Self: self},
		RetryMin:   time.Millisecond, RetryMax: 5 * time.Millisecond,
	})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error)
	go func() { errc <- e.Run(ctx) }()

	await.Send(t, src.in, names("web-0"), "the first set")
	await.Recv(t, rec.events, "the first attempt")
	await.Recv(t, rec.events, "a retry of the first set") // failed and retried at least once
	await.Send(t, src.in, names("web-0", "web-1", "web-2"), "the newer set")
	// Drain until the newest generation is attempted, then let it succeed.
	for await.Recv(t, rec.events, "an attempt with generation 2").Generation != 2 {
	}
	mu.Lock()
	failing = false
	mu.Unlock()
	for {
		d := await.Recv(t, rec.events, "a successful retry of generation 2")
		if d.Generation != 2 {
			t.Fatalf("retried an old set: generation %d", d.Generation)
		}
		rec.mu.Lock()
		ok := len(rec.got) > 0
		rec.mu.Unlock()
		if ok {
			break
		}
	}
	cancel()
	if err := await.Recv(t, errc, "Run to return after cancel"); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.got) != 1 || rec.got[0].Set.Len() != 3 || !rec.got[0].First || len(rec.got[0].Added) != 3 {
		t.Fatalf("successful deliveries = %+v", rec.got)
	}
}

func TestSinksRunInOrderAndLaterSinksWaitForEarlierOnes(t *testing.T) {
	var order []string
	var mu sync.Mutex
	fails := 2
	first := &recorder{name: "files", log: &order, fail: func(sink.Delivery) bool {
		mu.Lock()
		defer mu.Unlock()
		fails--
		return fails >= 0
	}}
	second := &recorder{name: "hook", log: &order}
	e := New(Config{
		Sources:    []NamedSource{{"static", static.Source{Peers: names("web-0")}}},
		Sinks:      []NamedSink{{"files", first}, {"hook", second}},
		Membership: membership.Options{Self: self},
		Once:       true,
		RetryMin:   time.Millisecond, RetryMax: time.Millisecond,
	})
	if err := run(t, e); err != nil {
		t.Fatal(err)
	}
	if want := []string{"files:1", "files:1", "files:1", "hook:1"}; !slices.Equal(order, want) {
		t.Errorf("order = %v, want %v", order, want)
	}
}

func TestBootstrapTimeout(t *testing.T) {
	e := New(Config{
		Sources:          []NamedSource{{"static", static.Source{Peers: names("web-1")}}},
		Sinks:            []NamedSink{{"rec", &recorder{}}},
		Membership:       membership.Options{Self: self},
		Once:             true,
		BootstrapTimeout: 50 * time.Millisecond,
	})
	if err := run(t, e); !errors.Is(err, ErrBootstrapTimeout) {
		t.Fatalf("err = %v, want ErrBootstrapTimeout", err)
	}
	if r := e.Status().Verdict.Reason; r != membership.WaitSelf {
		t.Errorf("verdict = %s, want %s", r, membership.WaitSelf)
	}
}

type failingSource struct{}

func (failingSource) Run(context.Context, chan<- []peer.Peer) error { return errors.New("bad config") }

func TestSourceErrorStopsRun(t *testing.T) {
	e := New(Config{Sources: []NamedSource{{"bad", failingSource{}}}, Sinks: []NamedSink{{"rec", &recorder{}}}})
	if err := run(t, e); err == nil || err.Error() != "source bad: bad config" {
		t.Fatalf("err = %v", err)
	}
}

func TestStableForCoalescesChurn(t *testing.T) {
	src := chanSource{in: make(chan []peer.Peer)}
	rec := &recorder{events: make(chan sink.Delivery, 10)}
	e := New(Config{
		Sources:    []NamedSource{{"test", src}},
		Sinks:      []NamedSink{{"rec", rec}},
		Membership: membership.Options{Self: self, StableFor: 500 * time.Millisecond},
	})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error)
	go func() { errc <- e.Run(ctx) }()
	await.Send(t, src.in, names("web-0"), "the first set")
	await.Send(t, src.in, names("web-0", "web-1"), "the second set")
	await.Send(t, src.in, names("web-0", "web-1", "web-2"), "the third set")
	d := await.Recv(t, rec.events, "the delivery after the stable-for window")
	cancel()
	if err := await.Recv(t, errc, "Run to return after cancel"); err != nil {
		t.Fatal(err)
	}
	if d.Generation != 1 || d.Set.Len() != 3 {
		t.Fatalf("delivery = generation %d with %v, want one delivery of the final set", d.Generation, d.Set.Keys())
	}
}

// run runs e until it returns, failing the test if it does not within
// await.Timeout (it is then left running: the test has failed anyway).
func run(t *testing.T, e *Engine) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- e.Run(t.Context()) }()
	return await.Recv(t, errc, "Run to return")
}

func waitStatus(t *testing.T, e *Engine, ok func(Status) bool) Status {
	t.Helper()
	var s Status
	await.Check(t, func() error {
		if s = e.Status(); !ok(s) {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	}, "the engine's status to match")
	return s
}

// chanSize is a SizeSource forwarding whatever the test sends on in.
type chanSize struct {
	in  chan int
	err chan error
}

func (s chanSize) Run(ctx context.Context, up chan<- int) error {
	for {
		select {
		case n := <-s.in:
			select {
			case up <- n:
			case <-ctx.Done():
				return nil
			}
		case err := <-s.err:
			return err
		case <-ctx.Done():
			return nil
		}
	}
}

// waitVerdict polls the engine's status until its verdict has reason r.
func waitVerdict(t *testing.T, e *Engine, r membership.Reason, need int) {
	t.Helper()
	await.Check(t, func() error {
		if v := e.Status().Verdict; v.Reason != r || v.Need != need {
			return fmt.Errorf("verdict = %s (need %d)", v.Reason, v.Need)
		}
		return nil
	}, "verdict %s (need %d)", r, need)
}

func TestExpectedSizeFromSizeSource(t *testing.T) {
	src := chanSource{in: make(chan []peer.Peer)}
	size := chanSize{in: make(chan int), err: make(chan error)}
	rec := &recorder{events: make(chan sink.Delivery, 10)}
	e := New(Config{
		Sources:    []NamedSource{{"test", src}},
		Sinks:      []NamedSink{{"rec", rec}},
		Membership: membership.Options{Self: self, MinPeers: 1},
		Expect:     size,
	})
	errc := make(chan error)
	go func() { errc <- e.Run(t.Context()) }()

	await.Send(t, src.in, names("web-0", "web-1"), "two peers")
	waitVerdict(t, e, membership.WaitExpect, 1) // size unknown: hold
	await.Send(t, size.in, 3, "the size 3")
	waitVerdict(t, e, membership.WaitSize, 3)
	await.Send(t, src.in, names("web-0", "web-1", "web-2"), "three peers")
	if d := await.Recv(t, rec.events, "the delivery of 3 peers"); d.Set.Len() != 3 {
		t.Fatalf("delivery = %v, want 3 peers", d.Set.Keys())
	}
	await.Send(t, size.in, 4, "the size 4") // scale up: the next set must have 4
	waitVerdict(t, e, membership.WaitSize, 4)
	await.Send(t, src.in, names("web-0", "web-1", "web-2", "web-3"), "four peers")
	if d := await.Recv(t, rec.events, "the delivery of 4 peers"); d.Set.Len() != 4 {
		t.Fatalf("delivery = %v, want 4 peers", d.Set.Keys())
	}
	await.Send(t, size.err, errors.New("no owner"), "the size source's error")
	if err := await.Recv(t, errc, "Run to return the size source's error"); err == nil || err.Error() != "expected size: no owner" {
		t.Fatalf("Run() = %v, want the size source's error", err)
	}
}
