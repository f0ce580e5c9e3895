package dns

import (
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flockd/flock/internal/testing/dnstest"
	"github.com/flockd/flock/peerfinder/source"
)

// Only the service's own members, with valid RFC 1123 names, come out of an
// answer (issue 11 #4, #9); the rejected targets are logged once per change
// of what is rejected, with the reason, at the default level.
func TestOnlyOwnMembersAccepted(t *testing.T) {
	s := dnstest.New(t)
	good := []dnstest.SRVRecord{{Target: "web-0." + svc, Port: 80}, {Target: "10-1-2-3." + svc, Port: 80}, {Target: "WEB-2." + strings.ToUpper(svc), Port: 80}}
	hostile := []dnstest.SRVRecord{
		{Target: "foreign.example.com", Port: 80},
		{Target: "localhost", Port: 80},
		{Target: "db-0.db.default.svc.cluster.local", Port: 80}, // another service's member
		{Target: "a.web-0." + svc, Port: 80},                    // not a direct member
		{Target: "-lead." + svc, Port: 80},                      // reads as an option to a hook
		{Target: "_x." + svc, Port: 80},
		{Target: "web_1." + svc, Port: 80},
		{Target: "web-9-." + svc, Port: 80},
		{Target: svc, Port: 80}, // the service itself
	}
	s.SetSRV(svc, append(slices.Clone(good), hostile...)...)
	h := run(t, Config{Name: svc, Servers: []string{s.Addr()}})
	sent, _ := h.step()
	want := []string{"10-1-2-3." + svc, "web-0." + svc, "web-2." + svc}
	if got := fqdns(sent); !slices.Equal(got, want) {
		t.Fatalf("delivered %v, want only the service's own members %v", got, want)
	}
	warns := h.logs.AtLevel(slog.LevelWarn)
	if len(warns) != 1 || warns[0].Attrs["name"] != svc+"." {
		t.Fatalf("warnings = %v, want one about the rejected targets of %s", warns, svc)
	}
	logged := warns[0].Attrs["rejected"]
	for _, r := range hostile {
		name := strings.ToLower(strings.TrimSuffix(r.Target, "."))
		if !strings.Contains(logged, name) {
			t.Errorf("rejected target %q not named in the log: %s", name, logged)
		}
	}
	if !strings.Contains(logged, "not a member of "+svc) || !strings.Contains(logged, "RFC 1123") {
		t.Errorf("log does not say why: %s", logged)
	}
	// The same answer again: no new warning.
	h.step()
	if n := len(h.logs.AtLevel(slog.LevelWarn)); n != 1 {
		t.Errorf("%d warnings after an unchanged answer, want still 1", n)
	}
	// A change of what is rejected is logged again.
	s.SetSRV(svc, append(slices.Clone(good), dnstest.SRVRecord{Target: "evil.example.org", Port: 80})...)
	h.step()
	if n := len(h.logs.AtLevel(slog.LevelWarn)); n != 2 {
		t.Errorf("%d warnings after the rejected names changed, want 2", n)
	}
}

// Attempts (resolv.conf attempts:) makes a failing lookup ask every server
// that many times before it fails (issue 11 #12).
func TestLookupAttempts(t *testing.T) {
	for _, attempts := range []int{0, 1, 3} {
		s := dnstest.New(t)
		s.Peers(svc, "web", 1, 80)
		s.SetBehaviour(svc, dnstest.Behaviour{Rcode: 2}) // SERVFAIL
		src, err := New(Config{Name: svc, Servers: []string{s.Addr()}, Attempts: attempts})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := src.Lookup(t.Context()); err == nil {
			t.Fatalf("attempts %d: lookup of a SERVFAIL name succeeded", attempts)
		}
		if got, want := s.Queries("udp"), max(attempts, 1); got != want {
			t.Errorf("attempts %d: %d queries, want %d", attempts, got, want)
		}
	}
}

// A flapping server (SERVFAIL on every other query) meets a growing backoff,
// not one reset by each success, and its state changes are logged at a
// bounded rate (issue 11 #8).
func TestRunFlappingBacksOffAndLogsBounded(t *testing.T) {
	s := dnstest.New(t)
	s.Peers(svc, "web", 2, 80)
	h := run(t, Config{Name: svc, Servers: []string{s.Addr()}, Period: time.Second, MaxBackoff: 15 * time.Second})
	h.step()
	var failPauses []time.Duration
	var virtual time.Duration
	for i := range 40 {
		if i%2 == 0 {
			s.SetBehaviour(svc, dnstest.Behaviour{Rcode: 2})
		} else {
			s.SetBehaviour(svc, dnstest.Behaviour{})
		}
		_, pause := h.step()
		virtual += pause
		if i%2 == 0 {
			failPauses = append(failPauses, pause)
		} else if pause != time.Second {
			t.Fatalf("pause after a successful lookup = %v, want the period", pause)
		}
	}
	if last := failPauses[len(failPauses)-1]; last < 8*time.Second {
		t.Errorf("backoff under flapping stays at %v (pauses after failures %v), want it to grow", last, failPauses)
	}
	records := len(h.logs.AtLevel(slog.LevelWarn)) + len(h.logs.AtLevel(slog.LevelInfo))
	if limit := int(virtual/source.LogGap) + 2; records > limit {
		t.Errorf("%d failing/recovered records in %v of flapping, want at most %d (one per %v)", records, virtual, limit, source.LogGap)
	}
	if records < 2 {
		t.Errorf("%d records, want the flapping to show", records)
	}
}
