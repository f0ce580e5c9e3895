package dns

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/miekg/dns"

	"github.com/flockd/flock/peerfinder/peer"
)

// ErrTruncated means an answer was still truncated over TCP: it would be a
// partial peer set, so it is treated as a failure.
var ErrTruncated = errors.New("answer still truncated over TCP")

// RcodeError is a DNS error response other than NXDOMAIN from one server.
type RcodeError struct {
	Rcode int
}

func (e *RcodeError) Error() string { return "rcode " + dns.RcodeToString[e.Rcode] }

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
