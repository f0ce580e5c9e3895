// Package dns discovers peers from the SRV records of a headless Service.
//
// Each poll sends one SRV query for the configured name, as an absolute name
// (never the short name: the search path and ndots play no part), to the
// configured servers in order. A query goes over UDP with EDNS0 (4096 bytes)
// and is repeated over TCP when the answer is truncated, since SRV answers
// overflow UDP at about a dozen peers without EDNS0 and at about ninety with it.
//
// A lookup has three honest outcomes:
//   - an answer (NOERROR) from a server: the peers it names, delivered;
//   - NXDOMAIN from every server: the authoritative empty set, delivered;
//   - anything else (SERVFAIL, REFUSED, a timeout, a network error, an answer
//     still truncated over TCP, an unparsable answer, only responses that do
//     not answer the query: QR clear, another question echoed, answer
//     records of another class) from every server:
//     an error; nothing is delivered and the last set stands. A TCP answer
//     flagged TC whose additional section survived is complete, not
//     truncated (see answerComplete).
//
// NOERROR without SRV records (NODATA) is an answer with no peers: CoreDNS
// answers that way for a Service that exists without ready endpoints, which
// is the authoritative "no peers yet" a first member needs to learn it is first.
//
// Each SRV target becomes one peer: FQDN is the target without the trailing
// dot, Name its first label, Ports the SRV ports, Ready true, Ordinal from
// Name by ordinal.FromName (-1 for dashed-IP names such as
// "10-1-2-3"), and IPs the
// A/AAAA records for the target found in the same response (CoreDNS sends
// them as glue in the additional section). Targets without glue are not
// queried one by one: that would cost two queries per peer per poll, 1,000
// per second at 500 peers; such peers keep the IPs they had in the
// previous answer, or are delivered without IPs. Records that
// are not SRV records of the queried name are skipped. Only the service's own
// members are delivered: a target must be one valid RFC 1123 label below the
// queried name (see source.Member); other targets are rejected, logged once per
// change of what is rejected with the reason, and the good records next to
// them are delivered.
package dns

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flockd/flock/internal/retry"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/source"
)

// Defaults for the zero values of Config.
const (
	DefaultPeriod     = time.Second      // upstream peer-finder polls every second
	DefaultTimeout    = 2 * time.Second  // per query and transport, like a short resolv.conf timeout
	DefaultMaxBackoff = 15 * time.Second // longest pause between lookups while all servers fail
	udpSize           = 4096             // EDNS0 buffer size we advertise
)

// Config configures a Source. Name and Servers are required.
type Config struct {
	// Name is the fully qualified name of the governing headless Service,
	// e.g. "web.default.svc.cluster.local". It is queried exactly, as an
	// absolute name; a trailing dot is optional.
	Name string
	// Servers are the DNS servers as "host:port", asked in order until one
	// gives an answer or NXDOMAIN. A server without a port gets port 53.
	// The caller supplies them (resolv.conf nameservers or -dns-server).
	Servers []string
	// Period is the pause between lookups while they succeed (DefaultPeriod).
	Period time.Duration
	// Timeout bounds each query to each server, per transport (DefaultTimeout).
	Timeout time.Duration
	// Attempts is how many rounds over the servers one lookup makes before
	// it fails (resolv.conf's attempts:); 1 when zero.
	Attempts int
	// MaxBackoff caps the pause between lookups while every server fails
	// (DefaultMaxBackoff). The pause doubles from 2×Period per failed lookup,
	// with jitter, and never exceeds MaxBackoff.
	MaxBackoff time.Duration
	// Logger receives one record per change of state (failing, recovered);
	// nil discards logs.
	Logger *slog.Logger
	// Metrics, when not nil, counts lookups, failures and truncations.
	Metrics *Metrics
}

// Metrics are the counters of a Source. Create them with NewMetrics; one
// Metrics may be shared by several sources.
type Metrics struct {
	// Lookups counts lookups (one per poll, each may ask several servers).
	Lookups prometheus.Counter
	// Failures counts failed queries to one server, by reason: "timeout",
	// "network", "servfail", "refused", "rcode" (another error rcode),
	// "truncated", "mismatch" (responses that did not answer the query) or
	// "malformed".
	Failures *prometheus.CounterVec
	// Truncated counts answers that were still truncated over TCP and so
	// were not delivered.
	Truncated prometheus.Counter
	// Unchanged counts answers with the same records as the server's last
	// one (in any order), whose parsing was skipped.
	Unchanged prometheus.Counter
}

// NewMetrics creates the counters and registers them with reg when reg is not nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Lookups: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flock_dns_lookups_total",
			Help: "SRV lookups of the service name, one per poll.",
		}),
		Failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flock_dns_lookup_failures_total",
			Help: "Failed SRV queries to one DNS server, by reason.",
		}, []string{"reason"}),
		Truncated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flock_dns_truncated_total",
			Help: "SRV answers still truncated over TCP and therefore not delivered.",
		}),
		Unchanged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flock_dns_unchanged_answers_total",
			Help: "SRV answers with the same records as the same server's previous one (in any order), not parsed again.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.Lookups, m.Failures, m.Truncated, m.Unchanged)
	}
	return m
}

// Source is the DNS source. It implements source.Source.
type Source struct {
	name       string // absolute, lower case
	servers    []string
	period     time.Duration
	timeout    time.Duration
	attempts   int
	maxBackoff time.Duration
	log        *slog.Logger
	metrics    *Metrics
	udp, tcp   *dns.Client

	mu       sync.Mutex            // guards tcpFirst and last (Lookup may run beside Run)
	tcpFirst map[string]bool       // by server: its answers need TCP
	last     map[string]lastAnswer // by server: its last complete answer

	// Test seams; nil: the real ones.
	now    func() time.Time                                 // the clock for log rate limiting
	wait   func(ctx context.Context, d time.Duration) error // pause between lookups
	jitter func(d time.Duration) time.Duration              // applied to backoff pauses
}

var _ source.Source = (*Source)(nil)

// New validates cfg and returns a Source.
func New(cfg Config) (*Source, error) {
	name := strings.TrimSpace(cfg.Name)
	if name == "" || name == "." {
		return nil, errors.New("dns source: empty name")
	}
	name = dns.CanonicalName(name)
	if _, ok := dns.IsDomainName(name); !ok {
		return nil, fmt.Errorf("dns source: invalid name %q", cfg.Name)
	}
	if len(cfg.Servers) == 0 {
		return nil, errors.New("dns source: no servers")
	}
	servers := make([]string, len(cfg.Servers))
	for i, s := range cfg.Servers {
		if _, _, err := net.SplitHostPort(s); err != nil {
			s = net.JoinHostPort(strings.Trim(s, "[]"), "53")
			if _, _, err := net.SplitHostPort(s); err != nil || strings.Trim(cfg.Servers[i], "[] ") == "" {
				return nil, fmt.Errorf("dns source: invalid server %q", cfg.Servers[i])
			}
		}
		servers[i] = s
	}
	if cfg.Period < 0 || cfg.Timeout < 0 || cfg.MaxBackoff < 0 {
		return nil, errors.New("dns source: negative period, timeout or max backoff")
	}
	s := &Source{
		name:       name,
		servers:    servers,
		period:     cmp.Or(cfg.Period, DefaultPeriod),
		timeout:    cmp.Or(cfg.Timeout, DefaultTimeout),
		attempts:   max(cfg.Attempts, 1),
		maxBackoff: cmp.Or(cfg.MaxBackoff, DefaultMaxBackoff),
		log:        cfg.Logger,
		metrics:    cfg.Metrics,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.maxBackoff = max(s.maxBackoff, s.period)
	s.udp = &dns.Client{Net: "udp", Timeout: s.timeout, UDPSize: udpSize}
	s.tcp = &dns.Client{Net: "tcp", Timeout: s.timeout}
	s.tcpFirst, s.last = make(map[string]bool), make(map[string]lastAnswer)
	return s, nil
}

// Run polls until ctx is done, following the source.Source contract, with
// source.Poll: it sends the first answer, then each answer that differs
// from the last one sent; a failed lookup sends nothing and lengthens the
// pause (exponential backoff from 2×Period with jitter up to MaxBackoff,
// decaying over successful lookups). Failing and recovered states are
// logged at a bounded rate, a still-truncated answer as an error; rejected
// targets are logged once per change of what is rejected. Run returns nil
// when ctx is done.
func (s *Source) Run(ctx context.Context, up chan<- []peer.Peer) error {
	var rejects source.RejectLog
	// The last keepIPs: an unchanged answer (the same Set, see query) over
	// the same last set gives the same result without recomputing it.
	var memoIn, memoLast, memoOut peer.Set
	return source.Poll{
		Lookup: func(ctx context.Context, last peer.Set) (peer.Set, error) {
			set, rejected, err := s.lookupMembers(ctx)
			if err != nil {
				return set, err
			}
			if set.Same(memoIn) && last.Same(memoLast) {
				return memoOut, nil
			}
			rejects.Log(s.log, "dns answer names targets that are not members of the service; not delivered", s.name, rejected)
			out := keepIPs(set, last)
			if out.Equal(last) {
				out = last // keeps the next poll's comparisons constant-time
			}
			memoIn, memoLast, memoOut = set, last, out
			return out, nil
		},
		Reason: Reason,
		Level: func(reason string) slog.Level {
			if reason == "truncated" {
				return slog.LevelError
			}
			return slog.LevelWarn
		},
		Name:    s.name,
		Period:  s.period,
		Backoff: s.backoff(),
		Logger:  s.log,
		Now:     s.now,
		Wait:    s.wait,
	}.Run(ctx, up)
}

// backoff is the pause after failed lookups: Period×2^level, capped at
// MaxBackoff, with jitter.
func (s *Source) backoff() retry.Backoff {
	return retry.Backoff{Min: min(2*s.period, s.maxBackoff), Max: s.maxBackoff, Jitter: s.jitter}
}

// Lookup performs one lookup and returns the peers sorted by FQDN. An empty,
// non-nil result with a nil error is authoritative: NXDOMAIN from every
// server, or NODATA. On error the peers are nil; the error joins the reasons
// of every server (see Reason).
func (s *Source) Lookup(ctx context.Context) ([]peer.Peer, error) {
	set, err := s.lookup(ctx)
	if err != nil {
		return nil, err
	}
	if set.Len() == 0 {
		return []peer.Peer{}, nil
	}
	return set.Peers(), nil // the set is not kept, so the caller may own its slice
}

func (s *Source) lookup(ctx context.Context) (peer.Set, error) {
	set, _, err := s.lookupMembers(ctx)
	return set, err
}
