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
//     still truncated over TCP, an unparsable answer) from every server:
//     an error; nothing is delivered and the last set stands. A TCP answer
//     flagged TC whose additional section survived is complete, not
//     truncated (see answerComplete).
//
// NOERROR without SRV records (NODATA) is an answer with no peers: CoreDNS
// answers that way for a Service that exists without ready endpoints, which
// is the authoritative "no peers yet" a first member needs to learn it is first.
//
// Each SRV target becomes one peer: FQDN is the target without the trailing
// dot, Name its first label, Ports the SRV ports, Ready true, Ordinal the
// number after the last "-" of Name when that looks like a StatefulSet
// ordinal (not for dashed-IP names such as "10-1-2-3"), else -1, and IPs the
// A/AAAA records for the target found in the same response (CoreDNS sends
// them as glue in the additional section). Targets without glue are not
// queried one by one: that would cost two queries per peer per poll, 1,000
// per second at 500 peers; such peers keep the IPs they had in the
// previous answer, or are delivered without IPs. Records that
// are not SRV records of the queried name are skipped. Only the service's own
// members are delivered: a target must be one valid RFC 1123 label below the
// queried name (see member); other targets are rejected, logged once per
// change of what is rejected with the reason, and the good records next to
// them are delivered.
package dns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/validation"

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
	// "truncated" or "malformed".
	Failures *prometheus.CounterVec
	// Truncated counts answers that were still truncated over TCP and so
	// were not delivered.
	Truncated prometheus.Counter
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
	}
	if reg != nil {
		reg.MustRegister(m.Lookups, m.Failures, m.Truncated)
	}
	return m
}

// ErrTruncated means an answer was still truncated over TCP: it would be a
// partial peer set, so it is treated as a failure.
var ErrTruncated = errors.New("answer still truncated over TCP")

// RcodeError is a DNS error response other than NXDOMAIN from one server.
type RcodeError struct {
	Rcode int
}

func (e *RcodeError) Error() string { return "rcode " + dns.RcodeToString[e.Rcode] }

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

	// Test seams.
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
		period:     cmpOr(cfg.Period, DefaultPeriod),
		timeout:    cmpOr(cfg.Timeout, DefaultTimeout),
		attempts:   max(cfg.Attempts, 1),
		maxBackoff: cmpOr(cfg.MaxBackoff, DefaultMaxBackoff),
		log:        cfg.Logger,
		metrics:    cfg.Metrics,
		now:        time.Now,
		wait:       sleep,
		jitter:     equalJitter,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.maxBackoff = max(s.maxBackoff, s.period)
	s.udp = &dns.Client{Net: "udp", Timeout: s.timeout, UDPSize: udpSize}
	s.tcp = &dns.Client{Net: "tcp", Timeout: s.timeout}
	return s, nil
}

func cmpOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// equalJitter returns a pause in [d/2, d].
func equalJitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}

// Run polls until ctx is done, following the source.Source contract: it
// sends the first answer, then each answer that differs from the last one
// sent; a failed lookup sends nothing and lengthens the pause (exponential
// backoff with jitter up to MaxBackoff). A successful lookup pauses for the
// period, but does not reset the backoff: its level drops by one per
// decayAfter successful lookups in a row, so a flapping server (SERVFAIL on
// every other query) meets a growing backoff instead of a fresh one each
// time. It logs a warning when lookups start failing (an error when the
// answer is truncated even over TCP), again when the reason changes, and an
// info record when they recover, at most one such record per logGap: a
// change within logGap of the last record is counted and logged, with the
// count, once logGap has passed. Run returns nil when ctx is done.
func (s *Source) Run(ctx context.Context, up chan<- []peer.Peer) error {
	var (
		last       peer.Set
		sent       bool
		level      int    // backoff level: +1 per failed lookup, decays on success
		healthy    int    // successful lookups in a row
		failures   int    // consecutive failed lookups
		failReason string // reason of the current failing state
		failSince  time.Time
		logged     string // the state last logged: "" healthy, else the failure reason
		loggedAt   time.Time
		unlogged   int    // state changes not logged since loggedAt
		rejects    string // the rejected targets last logged
	)
	for {
		set, rejected, err := s.lookupMembers(ctx)
		if ctx.Err() != nil {
			return nil
		}
		now := s.now()
		if err != nil {
			if failReason == "" {
				failures = 0 // a new failing episode
			}
			failures++
			level = min(level+1, 32)
			healthy = 0
			reason := Reason(err)
			if reason != failReason {
				if failReason == "" {
					failSince = now
				}
				failReason = reason
				unlogged++
			}
		} else {
			set = keepIPs(set, last)
			if key := fmt.Sprint(rejected); key != rejects {
				if len(rejected) > 0 {
					s.log.Warn("dns answer names targets that are not members of the service; not delivered",
						"name", s.name, "rejected", rejected)
				}
				rejects = key
			}
			if failReason != "" {
				unlogged++
			}
			if healthy++; healthy >= decayAfter && level > 0 {
				level, healthy = level-1, 0
			}
		}
		state := failReason // what to log: "" healthy, else the failure reason
		if err == nil {
			state = ""
		}
		if state != logged && (loggedAt.IsZero() || now.Sub(loggedAt) >= logGap) {
			extra := []any{"name", s.name}
			if unlogged > 1 {
				extra = append(extra, "changes_since_last_record", unlogged)
			}
			if state != "" {
				level := slog.LevelWarn
				if state == "truncated" {
					level = slog.LevelError
				}
				s.log.Log(ctx, level, "dns lookup failing, keeping last peer set", append(extra, "reason", state, "err", err)...)
			} else {
				s.log.Info("dns lookup recovered", append(extra, "failed_lookups", failures,
					"failing_for", now.Sub(failSince).Round(time.Millisecond), "peers", set.Len())...)
			}
			logged, loggedAt, unlogged = state, now, 0
		}
		if err == nil {
			failReason = ""
			if !sent || !set.Equal(last) {
				select {
				case up <- clonePeers(set.Peers()):
				case <-ctx.Done():
					return nil
				}
				s.log.Debug("dns peers changed", "name", s.name, "peers", set.Len())
				last, sent = set, true
			}
		}
		pause := s.period
		if err != nil {
			pause = s.pause(level)
		}
		if s.wait(ctx, pause) != nil {
			return nil
		}
	}
}

// Rate limits of Run's state records and backoff decay.
const (
	logGap     = 30 * time.Second // at most one failing/recovered record per logGap
	decayAfter = 4                // successful lookups in a row that lower the backoff level by one
)

// pause returns the wait before the next lookup after failures consecutive
// failed lookups: Period while they succeed, then min(Period×2^failures,
// MaxBackoff) with jitter.
func (s *Source) pause(failures int) time.Duration {
	if failures == 0 {
		return s.period
	}
	d := s.maxBackoff
	if failures < 32 {
		d = min(s.period<<failures, s.maxBackoff)
		if d <= 0 { // overflow
			d = s.maxBackoff
		}
	}
	return s.jitter(d)
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

// lookupMembers is lookup that also returns the SRV targets it rejected.
func (s *Source) lookupMembers(ctx context.Context) (peer.Set, []Rejected, error) {
	if s.metrics != nil {
		s.metrics.Lookups.Inc()
	}
	var errs []error
	nxdomain := 0
	for attempt := range s.attempts {
		if attempt > 0 {
			errs, nxdomain = errs[:0], 0
		}
		for _, server := range s.servers {
			resp, err := s.query(ctx, server)
			if err == nil {
				switch resp.Rcode {
				case dns.RcodeSuccess:
					set, rejected := s.parse(resp)
					return set, rejected, nil
				case dns.RcodeNameError:
					nxdomain++
					continue
				default:
					err = &RcodeError{Rcode: resp.Rcode}
				}
			}
			if ctx.Err() != nil {
				return peer.Set{}, nil, fmt.Errorf("dns lookup %s: %w", s.name, ctx.Err())
			}
			err = fmt.Errorf("server %s: %w", server, err)
			if s.metrics != nil {
				s.metrics.Failures.WithLabelValues(Reason(err)).Inc()
				if errors.Is(err, ErrTruncated) {
					s.metrics.Truncated.Inc()
				}
			}
			errs = append(errs, err)
		}
		if nxdomain == len(s.servers) {
			return peer.Set{}, nil, nil
		}
	}
	return peer.Set{}, nil, fmt.Errorf("dns lookup %s: %w", s.name, errors.Join(errs...))
}

// query asks one server over UDP, and again over TCP if the answer is truncated.
func (s *Source) query(ctx context.Context, server string) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(s.name, dns.TypeSRV)
	m.SetEdns0(udpSize, false)
	resp, err := s.exchange(ctx, s.udp, m, server)
	if err != nil {
		return nil, err
	}
	if !resp.Truncated {
		return resp, nil
	}
	resp, err = s.exchange(ctx, s.tcp, m, server)
	if err != nil {
		return nil, fmt.Errorf("tcp after truncated udp answer: %w", err)
	}
	if resp.Truncated && !answerComplete(resp) {
		return nil, fmt.Errorf("%w (%d answers in the partial response)", ErrTruncated, len(resp.Answer))
	}
	return resp, nil
}

// answerComplete reports whether a response flagged TC still holds its
// whole answer section. Servers fill the sections in order (answer,
// authority, additional) and stop at the first record that does not fit, so
// any authority or additional record (other than the OPT pseudo-record)
// proves that every answer made it. CoreDNS sets TC over TCP when it only
// dropped additional records (glue for about 900 or more SRV targets),
// which RFC 2181 §9 says it should not; such an answer is complete and is
// delivered, its peers without glue having no IPs. A TC answer with nothing
// after the answer section may have been cut inside it, so it stays a failure.
func answerComplete(resp *dns.Msg) bool {
	if len(resp.Ns) > 0 {
		return true
	}
	for _, rr := range resp.Extra {
		if rr.Header().Rrtype != dns.TypeOPT {
			return true
		}
	}
	return false
}

func (s *Source) exchange(ctx context.Context, c *dns.Client, m *dns.Msg, server string) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, _, err := c.ExchangeContext(ctx, m, server)
	return resp, err
}

// Reason classifies a lookup error for metrics and logs: "timeout",
// "truncated", "servfail", "refused", "rcode", "malformed" or "network".
// For an error of a lookup it is the reason of the first server that failed.
func Reason(err error) string {
	err = firstLeaf(err)
	var rc *RcodeError
	var nerr net.Error
	var derr *dns.Error
	switch {
	case errors.Is(err, ErrTruncated):
		return "truncated"
	case errors.As(err, &rc):
		switch rc.Rcode {
		case dns.RcodeServerFailure:
			return "servfail"
		case dns.RcodeRefused:
			return "refused"
		}
		return "rcode"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &nerr) && nerr.Timeout():
		return "timeout"
	case errors.As(err, &derr):
		return "malformed"
	}
	return "network"
}

// firstLeaf follows the wrap chain of err into the first error of any join.
func firstLeaf(err error) error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			if errs := j.Unwrap(); len(errs) > 0 {
				return firstLeaf(errs[0])
			}
		}
	}
	return err
}

// Rejected is an SRV target that was not delivered, and why.
type Rejected struct {
	Target string
	Reason string
}

// String returns "target (reason)" for logs.
func (r Rejected) String() string { return r.Target + " (" + r.Reason + ")" }

// parse turns an answer into peers, skipping records that do not belong, and
// returns the SRV targets of the queried name it rejected (see member).
func (s *Source) parse(resp *dns.Msg) (peer.Set, []Rejected) {
	ips := make(map[string][]string, len(resp.Extra))
	for _, sec := range [][]dns.RR{resp.Extra, resp.Answer} {
		for _, rr := range sec {
			switch rr := rr.(type) {
			case *dns.A:
				owner := dns.CanonicalName(rr.Hdr.Name)
				ips[owner] = append(ips[owner], rr.A.String())
			case *dns.AAAA:
				owner := dns.CanonicalName(rr.Hdr.Name)
				ips[owner] = append(ips[owner], rr.AAAA.String())
			}
		}
	}
	peers := make([]peer.Peer, 0, len(resp.Answer))
	var rejected []Rejected
	skipped := 0
	for _, rr := range resp.Answer {
		srv, ok := rr.(*dns.SRV)
		if !ok || !strings.EqualFold(srv.Hdr.Name, s.name) {
			if rr.Header().Rrtype != dns.TypeA && rr.Header().Rrtype != dns.TypeAAAA {
				skipped++
			}
			continue
		}
		target := dns.CanonicalName(srv.Target)
		name, err := member(target, s.name)
		if err != nil {
			rejected = append(rejected, Rejected{Target: strings.TrimSuffix(target, "."), Reason: err.Error()})
			continue
		}
		p := peer.Peer{
			FQDN:    strings.TrimSuffix(target, "."),
			Name:    name,
			IPs:     ips[target],
			Ready:   true,
			Ordinal: ordinal(name),
		}
		if srv.Port != 0 {
			p.Ports = []peer.Port{{Port: int32(srv.Port)}}
		}
		peers = append(peers, p)
	}
	if skipped > 0 {
		s.log.Debug("dns answer has records that are not peers; skipped them",
			"name", s.name, "skipped", skipped, "peers", len(peers))
	}
	slices.SortFunc(rejected, func(a, b Rejected) int { return strings.Compare(a.Target, b.Target) })
	return peer.NewSet(peers...), slices.Compact(rejected)
}

// member returns the first label of target when target (absolute, lower
// case) is a member of the service: exactly one label below service, and
// that label a valid RFC 1123 label (letters, digits and inner '-': no '_',
// no leading '-' that a hook would read as an option). Anything else — a
// foreign name, localhost, another service's member, a name deeper below
// the service — could shadow a real member's name in the hosts file and
// count toward -expect, so it is rejected with the reason.
func member(target, service string) (string, error) {
	if !isHostName(target) || !dns.IsSubDomain(service, target) || dns.CountLabel(target) != dns.CountLabel(service)+1 {
		return "", fmt.Errorf("not a member of %s", strings.TrimSuffix(service, "."))
	}
	label, _, _ := strings.Cut(target, ".")
	if errs := validation.IsDNS1123Label(label); len(errs) > 0 {
		return "", fmt.Errorf("not an RFC 1123 name: %s", strings.Join(errs, "; "))
	}
	return label, nil
}

// isHostName reports whether name (absolute, lower case) is a host name made
// of letters, digits, '-' and '_' (not the root, no escaped bytes).
func isHostName(name string) bool {
	if name == "." || len(name) > 254 {
		return false
	}
	for label := range strings.SplitSeq(strings.TrimSuffix(name, "."), ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range []byte(label) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// ordinal returns N for a name "<prefix>-N" that looks like a StatefulSet pod
// name (prefix with a letter, N without leading zeros), else -1. Dashed IP
// addresses, which CoreDNS uses for endpoints without a hostname, give -1.
func ordinal(name string) int {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 {
		return -1
	}
	prefix, digits := name[:i], name[i+1:]
	if len(digits) > 1 && digits[0] == '0' || !strings.ContainsFunc(prefix, isLetter) {
		return -1
	}
	if net.ParseIP(strings.ReplaceAll(name, "-", ":")) != nil {
		return -1 // dashed IPv6 such as "fd00--a-1"
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

func isLetter(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' }

// clonePeers deep-copies peers so the receiver may own them.
// keepIPs gives each peer that came without glue the IPs it had in last.
// A large answer may carry glue for only some targets (see answerComplete),
// and which ones varies with the server's record order; without this the
// set would change on every poll.
func keepIPs(set, last peer.Set) peer.Set {
	ps := set.Peers()
	var filled []peer.Peer
	for i, p := range ps {
		if len(p.IPs) > 0 {
			continue
		}
		if old, ok := last.Get(p.Key()); ok && len(old.IPs) > 0 {
			if filled == nil {
				filled = slices.Clone(ps)
			}
			filled[i].IPs = old.IPs
		}
	}
	if filled == nil {
		return set
	}
	return peer.NewSet(filled...)
}

func clonePeers(ps []peer.Peer) []peer.Peer {
	out := slices.Clone(ps)
	if out == nil {
		out = []peer.Peer{}
	}
	for i := range out {
		out[i].IPs = slices.Clone(out[i].IPs)
		out[i].Ports = slices.Clone(out[i].Ports)
	}
	return out
}
