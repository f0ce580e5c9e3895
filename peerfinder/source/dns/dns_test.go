package dns

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/internal/testing/dnstest"
	"github.com/flockd/flock/internal/testing/logtest"
	"github.com/flockd/flock/peerfinder/peer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const svc = "web.default.svc.cluster.local"

func servers(t *testing.T, n int) []*dnstest.Server {
	ss := make([]*dnstest.Server, n)
	for i := range ss {
		ss[i] = dnstest.New(t)
	}
	return ss
}

func addrs(ss []*dnstest.Server) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.Addr()
	}
	return out
}

func fqdns(ps []peer.Peer) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.FQDN
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func TestLookup(t *testing.T) {
	peers := func(s *dnstest.Server) { s.Peers(svc, "web", 3, 80) }
	nx := func(*dnstest.Server) {}
	behave := func(b dnstest.Behaviour) func(*dnstest.Server) {
		return func(s *dnstest.Server) { peers(s); s.SetBehaviour(svc, b) }
	}
	three := []string{"web-0." + svc, "web-1." + svc, "web-2." + svc}
	tests := []struct {
		name    string
		setup   []func(*dnstest.Server)
		want    []string // nil: an error is expected
		reason  string
		timeout time.Duration // per query; 2s when zero
	}{
		{name: "answer", setup: []func(*dnstest.Server){peers}, want: three},
		{name: "nxdomain from all servers is empty", setup: []func(*dnstest.Server){nx, nx}, want: []string{}},
		{name: "nodata is empty", setup: []func(*dnstest.Server){func(s *dnstest.Server) { s.SetA(svc, "192.0.2.1") }}, want: []string{}},
		{name: "nxdomain then answer", setup: []func(*dnstest.Server){nx, peers}, want: three},
		{name: "answer then nxdomain", setup: []func(*dnstest.Server){peers, nx}, want: three},
		{name: "servfail then answer", setup: []func(*dnstest.Server){behave(dnstest.Behaviour{Rcode: dns.RcodeServerFailure}), peers}, want: three},
		{name: "timeout then answer", setup: []func(*dnstest.Server){behave(dnstest.Behaviour{Drop: true}), peers}, want: three, timeout: 300 * time.Millisecond},
		{name: "slow answer within timeout", setup: []func(*dnstest.Server){behave(dnstest.Behaviour{Delay: 50 * time.Millisecond})}, want: three},
		{name: "slow answer past timeout", setup: []func(*dnstest.Server){behave(dnstest.Behaviour{Delay: 3 * time.Second})}, reason: "timeout", timeout: 300 * time.Millisecond},
		{name: "servfail from all", setup: []func(*dnstest.Server){behave(dnstest.Behaviour{Rcode: dns.RcodeServerFailure}), behave(dnstest.Behaviour{Rcode: dns.RcodeServerFailure})}, reason: "servfail"},
		{name: "refused", setup: []func(*dnstest.Server){behave(dnstest.Behaviour{Rcode: dns.RcodeRefused})}, reason: "refused"},
		{name: "other rcode", setup: []func(*dnstest.Server){behave(dnstest.Behaviour{Rcode: dns.RcodeNotImplemented})}, reason: "rcode"},
		{name: "nxdomain and servfail is not authoritative", setup: []func(*dnstest.Server){nx, behave(dnstest.Behaviour{Rcode: dns.RcodeServerFailure})}, reason: "servfail"},
		{name: "junk next to good records", setup: []func(*dnstest.Server){behave(dnstest.Behaviour{Junk: true})}, want: three},
		{name: "500 peers over tcp", setup: []func(*dnstest.Server){func(s *dnstest.Server) { s.Peers(svc, "web", 500, 80) }}, want: func() []string {
			var out []string
			for i := range 500 {
				out = append(out, fmt.Sprintf("web-%d.%s", i, svc))
			}
			return sorted(out)
		}()},
		{name: "still truncated over tcp", setup: []func(*dnstest.Server){func(s *dnstest.Server) { s.Peers(svc, "web", 500, 80); s.SetTruncateTCP(true) }}, reason: "truncated"},
		// Hostile responses (issue 36 #14): only a response (QR) to our
		// question, in our class, is an answer; others are skipped until
		// the query times out.
		{name: "response without QR", setup: []func(*dnstest.Server){behave(dnstest.Behaviour{NotResponse: true})}, reason: "mismatch", timeout: 300 * time.Millisecond},
		{name: "answer to another name", setup: []func(*dnstest.Server){behave(dnstest.Behaviour{QuestionName: "db.default.svc.cluster.local"})}, reason: "mismatch", timeout: 300 * time.Millisecond},
		{name: "nxdomain for another name from all servers is not empty", setup: []func(*dnstest.Server){
			behave(dnstest.Behaviour{Rcode: dns.RcodeNameError, QuestionName: "db.default.svc.cluster.local"}),
			behave(dnstest.Behaviour{Rcode: dns.RcodeNameError, QuestionName: "db.default.svc.cluster.local"}),
		}, reason: "mismatch", timeout: 300 * time.Millisecond},
		{name: "nxdomain without QR is not empty", setup: []func(*dnstest.Server){behave(dnstest.Behaviour{Rcode: dns.RcodeNameError, NotResponse: true})}, reason: "mismatch", timeout: 300 * time.Millisecond},
		{name: "answer to another type", setup: []func(*dnstest.Server){behave(dnstest.Behaviour{QuestionType: dns.TypeA})}, reason: "mismatch", timeout: 300 * time.Millisecond},
		{name: "answer to another class", setup: []func(*dnstest.Server){behave(dnstest.Behaviour{QuestionClass: dns.ClassCHAOS})}, reason: "mismatch", timeout: 300 * time.Millisecond},
		{name: "answer records of another class", setup: []func(*dnstest.Server){behave(dnstest.Behaviour{AnswerClass: dns.ClassCHAOS})}, reason: "mismatch", timeout: 300 * time.Millisecond},
		{name: "question echoed in another case", setup: []func(*dnstest.Server){behave(dnstest.Behaviour{QuestionName: "WEB.Default.SVC.cluster.local"})}, want: three},
		{name: "hostile then answer", setup: []func(*dnstest.Server){behave(dnstest.Behaviour{NotResponse: true}), peers}, want: three, timeout: 300 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ss := servers(t, len(tt.setup))
			for i, f := range tt.setup {
				f(ss[i])
			}
			src, err := New(Config{Name: svc, Servers: addrs(ss), Timeout: cmp.Or(tt.timeout, 2*time.Second)})
			if err != nil {
				t.Fatal(err)
			}
			got, err := src.Lookup(context.Background())
			if tt.want == nil {
				if err == nil {
					t.Fatalf("got %d peers, want an error", len(got))
				}
				if r := Reason(err); r != tt.reason {
					t.Errorf("Reason = %q, want %q (err: %v)", r, tt.reason, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got == nil || !slices.Equal(fqdns(got), tt.want) {
				t.Errorf("got %v, want %v", fqdns(got), tt.want)
			}
		})
	}
}

func TestLookupPeerFields(t *testing.T) {
	s := dnstest.New(t)
	s.SetSRV(svc,
		dnstest.SRVRecord{Target: "web-0." + svc, Port: 80},
		dnstest.SRVRecord{Target: "web-0." + svc, Port: 8080},
		dnstest.SRVRecord{Target: "WEB-12." + svc + ".", Port: 80},
		dnstest.SRVRecord{Target: "10-1-2-3." + svc, Port: 80},
		dnstest.SRVRecord{Target: "noglue." + svc, Port: 0},
	)
	s.SetA("web-0."+svc, "10.0.0.1")
	s.SetAAAA("web-0."+svc, "fd00::1")
	s.SetA("web-12."+svc, "10.0.0.12")
	s.SetA("10-1-2-3."+svc, "10.1.2.3")
	src, err := New(Config{Name: svc + ".", Servers: []string{s.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := src.Lookup(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []peer.Peer{
		{FQDN: "10-1-2-3." + svc, Name: "10-1-2-3", IPs: []string{"10.1.2.3"}, Ready: true, Ordinal: -1, Ports: []peer.Port{{Port: 80}}},
		{FQDN: "noglue." + svc, Name: "noglue", Ready: true, Ordinal: -1},
		{FQDN: "web-0." + svc, Name: "web-0", IPs: []string{"10.0.0.1", "fd00::1"}, Ready: true, Ordinal: 0, Ports: []peer.Port{{Port: 80}, {Port: 8080}}},
		{FQDN: "web-12." + svc, Name: "web-12", IPs: []string{"10.0.0.12"}, Ready: true, Ordinal: 12, Ports: []peer.Port{{Port: 80}}},
	}
	if !slices.EqualFunc(got, want, peer.Peer.Equal) {
		t.Errorf("got\n%+v\nwant\n%+v", got, want)
	}
}

func TestLookupTCPFallbackAndTruncationMetrics(t *testing.T) {
	s := dnstest.New(t)
	s.Peers(svc, "web", 500, 80)
	m := NewMetrics(prometheus.NewRegistry())
	src, err := New(Config{Name: svc, Servers: []string{s.Addr()}, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	got, err := src.Lookup(context.Background())
	if err != nil || len(got) != 500 {
		t.Fatalf("got %d peers, err %v; want 500", len(got), err)
	}
	if u, c := s.Queries("udp"), s.Queries("tcp"); u != 1 || c != 1 {
		t.Errorf("queries udp %d tcp %d, want 1 and 1", u, c)
	}
	for _, p := range got {
		if len(p.IPs) != 1 || p.Ordinal < 0 {
			t.Fatalf("peer without glue address or ordinal: %+v", p)
		}
	}

	s.SetTruncateTCP(true)
	if got, err := src.Lookup(context.Background()); !errors.Is(err, ErrTruncated) || got != nil {
		t.Fatalf("got %d peers, err %v; want ErrTruncated and no peers", len(got), err)
	}
	if v := testutil.ToFloat64(m.Truncated); v != 1 {
		t.Errorf("truncated = %v, want 1", v)
	}
	if v := testutil.ToFloat64(m.Failures.WithLabelValues("truncated")); v != 1 {
		t.Errorf("failures{truncated} = %v, want 1", v)
	}
	if v := testutil.ToFloat64(m.Lookups); v != 2 {
		t.Errorf("lookups = %v, want 2", v)
	}
}

// harness runs a Source with its pauses under the test's control: after each
// lookup Run reports the pause it wants and waits for the test to go on.
type harness struct {
	t       *testing.T
	up      chan []peer.Peer
	pauses  chan time.Duration
	release chan struct{}
	started bool
	logs    *logtest.Recorder
}

func run(t *testing.T, cfg Config) *harness {
	t.Helper()
	h := &harness{
		t:       t,
		up:      make(chan []peer.Peer),
		pauses:  make(chan time.Duration),
		release: make(chan struct{}),
		logs:    logtest.New(),
	}
	cfg.Logger = h.logs.Logger()
	src, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	src.jitter = func(d time.Duration) time.Duration { return d }
	// Virtual time: each pause advances the clock by its length.
	var clock atomic.Int64
	clock.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	src.now = func() time.Time { return time.Unix(0, clock.Load()) }
	src.wait = func(ctx context.Context, d time.Duration) error {
		clock.Add(int64(d))
		select {
		case h.pauses <- d:
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case <-h.release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, h.up) }()
	t.Cleanup(func() {
		cancel()
		if err := await.Recv(t, done, "Run to return after cancel"); err != nil {
			t.Errorf("Run returned %v", err)
		}
	})
	return h
}

// step lets Run do its next lookup and returns what it sent (nil when it
// sent nothing) and the pause it asked for afterwards.
func (h *harness) step() (sent []peer.Peer, pause time.Duration) {
	h.t.Helper()
	timeout := time.After(10 * time.Second)
	if h.started {
		select {
		case h.release <- struct{}{}:
		case <-timeout:
			h.t.Fatal("Run did not wait")
		}
	}
	h.started = true
	for {
		select {
		case sent = <-h.up:
			if sent == nil {
				h.t.Fatal("Run sent a nil snapshot")
			}
		case pause = <-h.pauses:
			return sent, pause
		case <-timeout:
			h.t.Fatal("Run did not finish a lookup")
		}
	}
}

func TestRunDeliversChangesOnly(t *testing.T) {
	s := dnstest.New(t)
	first := s.Peers(svc, "web", 2, 80)
	h := run(t, Config{Name: svc, Servers: []string{s.Addr()}, Period: 3 * time.Second})

	sent, pause := h.step()
	if !slices.Equal(fqdns(sent), first) || pause != 3*time.Second {
		t.Fatalf("first lookup sent %v, paused %v; want %v and the period", fqdns(sent), pause, first)
	}
	if p := sent[0]; !p.Ready || p.Name != "web-0" || p.Ordinal != 0 || !slices.Equal(p.IPs, []string{dnstest.IPv4(0)}) {
		t.Errorf("peer fields: %+v", p)
	}
	sent[0].IPs[0] = "mutated by the receiver" // the receiver owns the snapshot

	for range 3 {
		if sent, _ := h.step(); sent != nil {
			t.Fatalf("unchanged answer sent again: %v", fqdns(sent))
		}
	}

	third := s.Peers(svc, "web", 3, 80)
	if sent, _ := h.step(); !slices.Equal(fqdns(sent), third) {
		t.Fatalf("after a change sent %v, want %v", fqdns(sent), third)
	}
	if sent, _ := h.step(); sent != nil {
		t.Fatalf("unchanged answer sent again: %v", fqdns(sent))
	}

	s.SetA(third[2], "192.0.2.7") // same names, new address: a change
	if sent, _ := h.step(); len(sent) != 3 || sent[2].IPs[0] != "192.0.2.7" {
		t.Fatalf("address change not sent: %+v", sent)
	}
	if recs := h.logs.AtLeast(slog.LevelInfo); len(recs) != 0 {
		t.Errorf("info or louder records while all went well: %v", recs)
	}
}

func TestRunFailureKeepsLastAndBacksOff(t *testing.T) {
	ss := servers(t, 2)
	for _, s := range ss {
		s.Peers(svc, "web", 2, 80)
	}
	h := run(t, Config{Name: svc, Servers: addrs(ss), Period: time.Second, MaxBackoff: 15 * time.Second})
	if sent, _ := h.step(); len(sent) != 2 {
		t.Fatalf("first lookup sent %d peers, want 2", len(sent))
	}

	for _, s := range ss {
		s.SetBehaviour(svc, dnstest.Behaviour{Rcode: dns.RcodeServerFailure})
	}
	var pauses []time.Duration
	for i := range 6 {
		sent, pause := h.step()
		if sent != nil {
			t.Fatalf("failed lookup %d sent %v", i, fqdns(sent))
		}
		pauses = append(pauses, pause)
	}
	want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 15 * time.Second, 15 * time.Second, 15 * time.Second}
	if !slices.Equal(pauses, want) {
		t.Errorf("pauses %v, want %v", pauses, want)
	}
	// The first server answered the first lookup alone; then each failed
	// lookup asked both, once each.
	if q0, q1 := ss[0].Queries("udp"), ss[1].Queries("udp"); q0 != 7 || q1 != 6 {
		t.Errorf("queries %d and %d, want 7 and 6", q0, q1)
	}
	if got := logtest.Messages(h.logs.AtLevel(slog.LevelWarn)); len(got) != 1 {
		t.Errorf("warnings %q, want one for the change of state", got)
	}

	// Back to health: the same set as before is not sent again, the period
	// is back, and one info record says so.
	for _, s := range ss {
		s.SetBehaviour(svc, dnstest.Behaviour{})
	}
	if sent, pause := h.step(); sent != nil || pause != time.Second {
		t.Errorf("recovery sent %v, paused %v; want nothing and the period", fqdns(sent), pause)
	}
	h.step()
	if got := logtest.Messages(h.logs.AtLevel(slog.LevelInfo)); !slices.Equal(got, []string{"lookup recovered"}) {
		t.Errorf("info records %q, want one recovery", got)
	}
}

// TestRunHostileNXDomainKeepsLastSet (issue 36 #14): NXDOMAIN for another
// name, or without QR, from every server is no authoritative empty set: the
// last set stands and the lookup fails with reason mismatch.
func TestRunHostileNXDomainKeepsLastSet(t *testing.T) {
	ss := servers(t, 2)
	for _, s := range ss {
		s.Peers(svc, "web", 2, 80)
	}
	h := run(t, Config{Name: svc, Servers: addrs(ss), Timeout: 200 * time.Millisecond})
	if sent, _ := h.step(); len(sent) != 2 {
		t.Fatalf("first lookup sent %d peers, want 2", len(sent))
	}
	ss[0].SetBehaviour(svc, dnstest.Behaviour{Rcode: dns.RcodeNameError, QuestionName: "db.default.svc.cluster.local"})
	ss[1].SetBehaviour(svc, dnstest.Behaviour{Rcode: dns.RcodeNameError, NotResponse: true})
	if sent, _ := h.step(); sent != nil {
		t.Fatalf("hostile NXDOMAIN from every server sent %v, want the last set kept", fqdns(sent))
	}
}

func TestRunNXDomainSendsEmpty(t *testing.T) {
	ss := servers(t, 2)
	for _, s := range ss {
		s.Peers(svc, "web", 2, 80)
	}
	h := run(t, Config{Name: svc, Servers: addrs(ss)})
	if sent, _ := h.step(); len(sent) != 2 {
		t.Fatalf("first lookup sent %d peers, want 2", len(sent))
	}

	ss[0].Delete(svc) // one server says NXDOMAIN, the other still answers
	if sent, _ := h.step(); sent != nil {
		t.Fatalf("NXDOMAIN from one server sent %v", fqdns(sent))
	}
	ss[1].Delete(svc)
	sent, pause := h.step()
	if sent == nil || len(sent) != 0 {
		t.Fatalf("NXDOMAIN from all servers sent %v, want an empty snapshot", sent)
	}
	if pause != DefaultPeriod {
		t.Errorf("paused %v after an authoritative answer, want %v", pause, DefaultPeriod)
	}
	if sent, _ := h.step(); sent != nil {
		t.Fatalf("empty set sent again: %v", sent)
	}
}

func TestRunStillTruncatedIsNotDelivered(t *testing.T) {
	s := dnstest.New(t)
	s.Peers(svc, "web", 5, 80)
	m := NewMetrics(nil)
	h := run(t, Config{Name: svc, Servers: []string{s.Addr()}, Metrics: m})
	if sent, _ := h.step(); len(sent) != 5 {
		t.Fatalf("first lookup sent %d peers, want 5", len(sent))
	}
	s.Peers(svc, "web", 500, 80)
	s.SetTruncateTCP(true)
	for range 3 {
		if sent, _ := h.step(); sent != nil {
			t.Fatalf("truncated answer delivered: %d peers", len(sent))
		}
	}
	if v := testutil.ToFloat64(m.Truncated); v != 3 {
		t.Errorf("truncated = %v, want 3", v)
	}
	if got := logtest.Messages(h.logs.AtLevel(slog.LevelError)); len(got) != 1 {
		t.Errorf("error records %q, want one", got)
	}
	s.SetTruncateTCP(false)
	if sent, _ := h.step(); len(sent) != 500 {
		t.Fatalf("after the fix sent %d peers, want 500", len(sent))
	}
}

func TestRunReturnsOnCancelWhileSending(t *testing.T) {
	s := dnstest.New(t)
	s.Peers(svc, "web", 1, 80)
	src, err := New(Config{Name: svc, Servers: []string{s.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, make(chan []peer.Peer)) }()                    // nobody receives
	await.Until(t, func() bool { return s.Queries("udp") > 0 }, "the first lookup") // then Run sends
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		servers []string // want, nil for an error
	}{
		{"ok", Config{Name: svc, Servers: []string{"10.96.0.10:53"}}, []string{"10.96.0.10:53"}},
		{"default port", Config{Name: svc, Servers: []string{"10.96.0.10", "fd00::10", "[fd00::11]"}}, []string{"10.96.0.10:53", "[fd00::10]:53", "[fd00::11]:53"}},
		{"no name", Config{Servers: []string{"10.96.0.10:53"}}, nil},
		{"bad name", Config{Name: "a..b", Servers: []string{"10.96.0.10:53"}}, nil},
		{"no servers", Config{Name: svc}, nil},
		{"empty server", Config{Name: svc, Servers: []string{""}}, nil},
		{"negative period", Config{Name: svc, Servers: []string{"10.96.0.10:53"}, Period: -1}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := New(tt.cfg)
			if tt.servers == nil {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(src.servers, tt.servers) || src.name != svc+"." {
				t.Errorf("servers %v name %q", src.servers, src.name)
			}
		})
	}
}

func TestPause(t *testing.T) {
	src, err := New(Config{Name: svc, Servers: []string{"127.0.0.1:53"}, Period: time.Second, MaxBackoff: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	b := src.backoff()
	for level, want := range map[int]time.Duration{1: 2 * time.Second, 2: 4 * time.Second, 3: 8 * time.Second, 4: 10 * time.Second, 100: 10 * time.Second} {
		for range 100 {
			if got := b.Delay(level); got < want/2 || got > want {
				t.Fatalf("pause at backoff level %d = %v, want in [%v, %v]", level, got, want/2, want)
			}
		}
	}
	// A MaxBackoff below 2×Period caps the first pause too.
	src, err = New(Config{Name: svc, Servers: []string{"127.0.0.1:53"}, Period: time.Second, MaxBackoff: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	src.jitter = func(d time.Duration) time.Duration { return d }
	if got := src.backoff().Delay(1); got != time.Second {
		t.Errorf("pause at level 1 with MaxBackoff = Period: %v, want %v", got, time.Second)
	}
}

// TestLookupTCPAnswerWithoutAllGlue covers CoreDNS's behaviour at about
// 1,000 SRV targets: over TCP the answer section fits but not all glue, and
// the server (miekg/dns Truncate, as CoreDNS) sets TC anyway. Every answer is
// there, so it is delivered; when the answer section itself is cut (no
// records after it), it is not.
func TestLookupTCPAnswerWithoutAllGlue(t *testing.T) {
	s := dnstest.New(t)
	m := NewMetrics(nil)
	src, err := New(Config{Name: svc, Servers: []string{s.Addr()}, Metrics: m, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s.Peers(svc, "web", 1000, 80)
	got, err := src.Lookup(context.Background())
	if err != nil || len(got) != 1000 {
		t.Fatalf("got %d peers, err %v; want all 1000", len(got), err)
	}
	withoutIPs := 0
	for _, p := range got {
		if len(p.IPs) == 0 {
			withoutIPs++
		}
	}
	if withoutIPs == 0 || withoutIPs == len(got) {
		t.Fatalf("%d of %d peers lack IPs; the answer should have lost some glue, not all", withoutIPs, len(got))
	}

	s.Peers(svc, "web", 1500, 80) // the answer section itself no longer fits in 64 KiB
	if got, err := src.Lookup(context.Background()); !errors.Is(err, ErrTruncated) || got != nil {
		t.Fatalf("got %d peers, err %v; want ErrTruncated and no peers", len(got), err)
	}
	if v := testutil.ToFloat64(m.Truncated); v != 1 {
		t.Errorf("truncated = %v, want 1", v)
	}
}

// TestRunKeepsIPsOfPeersWithoutGlue: an answer that lacks glue for some
// targets (large answers over TCP lose different glue on each poll) does not
// change the set; the peers keep the IPs they had.
func TestRunKeepsIPsOfPeersWithoutGlue(t *testing.T) {
	s := dnstest.New(t)
	s.Peers(svc, "web", 3, 80)
	h := run(t, Config{Name: svc, Servers: []string{s.Addr()}})
	sent, _ := h.step()
	if len(sent) != 3 || len(sent[0].IPs) != 1 {
		t.Fatalf("first lookup sent %+v", sent)
	}
	s.SetGlue(false)
	if sent, _ := h.step(); sent != nil {
		t.Fatalf("an answer without glue changed the set: %+v", sent)
	}
	s.Peers(svc, "web", 4, 80) // a new peer without glue has no IPs yet
	sent, _ = h.step()
	if len(sent) != 4 || len(sent[0].IPs) != 1 || len(sent[3].IPs) != 0 {
		t.Fatalf("after adding a peer without glue: %+v", sent)
	}
}

// TestLookupOversizeUDPAnswerRetriedOverTCP: a server that sends a UDP
// answer larger than the EDNS0 size the query advertised, without TC (a
// broken server or middlebox), is asked again over TCP, not failed as
// malformed for good; it is asked over TCP first from then on.
func TestLookupOversizeUDPAnswerRetriedOverTCP(t *testing.T) {
	s := dnstest.New(t)
	s.Peers(svc, "web", 200, 80) // about 10 KB with glue
	s.SetBehaviour(svc, dnstest.Behaviour{IgnoreUDPSize: true})
	src, err := New(Config{Name: svc, Servers: []string{s.Addr()}, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		got, err := src.Lookup(context.Background())
		if err != nil || len(got) != 200 {
			t.Fatalf("lookup %d: got %d peers, err %v; want 200", i, len(got), err)
		}
	}
	if u, c := s.Queries("udp"), s.Queries("tcp"); u != 1 || c != 2 {
		t.Errorf("queries udp %d tcp %d, want 1 and 2 (TCP first after the oversize answer)", u, c)
	}
}

// TestLookupFollowsCNAMEsOfSRVTargets: an SRV target that is an alias
// gets the addresses at the end of its CNAME chain in the response, as
// upstream's resolver (net.LookupSRV and a lookup of each target) gave
// it; a chain that loops or runs longer than maxCNAMEChain gives none,
// and a changed alias is noticed though the SRV records stay the same.
func TestLookupFollowsCNAMEsOfSRVTargets(t *testing.T) {
	s := dnstest.New(t)
	target := func(i int) string { return fmt.Sprintf("web-%d.%s", i, svc) }
	s.SetSRV(svc, dnstest.SRVRecord{Target: target(0), Port: 80}, dnstest.SRVRecord{Target: target(1), Port: 80},
		dnstest.SRVRecord{Target: target(2), Port: 80}, dnstest.SRVRecord{Target: target(3), Port: 80})
	s.SetA(target(0), "10.0.0.1")
	s.SetCNAME(target(1), "pod-1.pods.example")
	s.SetA("pod-1.pods.example", "10.0.1.1")
	s.SetCNAME(target(2), "a.pods.example") // two links
	s.SetCNAME("a.pods.example", "b.pods.example")
	s.SetAAAA("b.pods.example", "fd00::2")
	s.SetCNAME(target(3), "loop.pods.example") // a loop: no address, no hang
	s.SetCNAME("loop.pods.example", target(3))
	src, err := New(Config{Name: svc, Servers: []string{s.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	ips := func() map[string][]string {
		t.Helper()
		got, err := src.Lookup(context.Background())
		if err != nil || len(got) != 4 {
			t.Fatalf("got %d peers, err %v; want 4", len(got), err)
		}
		m := map[string][]string{}
		for _, p := range got {
			m[p.Name] = p.IPs
		}
		return m
	}
	want := map[string][]string{"web-0": {"10.0.0.1"}, "web-1": {"10.0.1.1"}, "web-2": {"fd00::2"}, "web-3": nil}
	if got := ips(); !reflect.DeepEqual(got, want) {
		t.Errorf("addresses %v, want %v", got, want)
	}
	// web-1 now aliases a name whose address web-0's alias had: same SRV
	// records, same glue addresses, another chain.
	s.SetCNAME(target(1), "a.pods.example")
	want["web-1"] = []string{"fd00::2"}
	if got := ips(); !reflect.DeepEqual(got, want) {
		t.Errorf("after the alias changed: addresses %v, want %v", got, want)
	}
}
