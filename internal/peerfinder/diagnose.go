package peerfinder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/flockd/flock/internal/config"
	"github.com/flockd/flock/membership"
	"github.com/flockd/flock/source"
)

// errHeldBack is returned by diagnose when delivery would not happen now.
var errHeldBack = errors.New("delivery is held back")

// diagnose prints, once, what peer-finder sees and which gate holds delivery
// back, with advice on what to change.
func diagnose(ctx context.Context, cfg *config.Config, p *pipeline, w io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	fmt.Fprintf(w, "domain:   %s (from %s)\n", cfg.Domain, cfg.DomainSource)
	fmt.Fprintf(w, "service:  %s\n", cfg.ServiceFQDN())
	fmt.Fprintf(w, "self:     %s\n", cfg.Self())
	fmt.Fprintf(w, "dns:      %s\n", strings.Join(cfg.DNSServers, ", "))
	views := make([]membership.View, 0, len(p.sources))
	for _, s := range p.sources {
		l, ok := s.Source.(source.Lookuper)
		if !ok {
			fmt.Fprintf(w, "source %s: cannot be queried once\n", s.Name)
			views = append(views, membership.View{Source: s.Name})
			continue
		}
		peers, err := l.Lookup(ctx)
		if err != nil {
			fmt.Fprintf(w, "source %s: lookup failed: %v\n", s.Name, err)
			views = append(views, membership.View{Source: s.Name})
			continue
		}
		fmt.Fprintf(w, "source %s: %d peers\n", s.Name, len(peers))
		for _, pr := range peers {
			fmt.Fprintf(w, "  %s %s ready=%v\n", pr.Key(), strings.Join(pr.IPs, ","), pr.Ready)
		}
		views = append(views, membership.View{Source: s.Name, Reported: true, Peers: peers})
	}
	_, _, v := membership.Compute(views, p.opts, membership.Observation{}, time.Now())
	if v.Publishable() {
		fmt.Fprintf(w, "verdict:  deliver (%d peers)\n", v.Peers)
		return nil
	}
	fmt.Fprintf(w, "verdict:  wait: %s: %s\n", v.Reason, v.Detail)
	if hint := advice(v.Reason, cfg); hint != "" {
		fmt.Fprintf(w, "hint:     %s\n", hint)
	}
	return errHeldBack
}

func advice(r membership.Reason, cfg *config.Config) string {
	switch r {
	case membership.WaitSources:
		return "a source could not answer; check the DNS servers (-dns-server) and that the service exists"
	case membership.WaitEmpty:
		return fmt.Sprintf("the service %s has no endpoints; if its pods are not ready yet, set publishNotReadyAddresses: true on the headless service", cfg.ServiceFQDN())
	case membership.WaitSelf:
		return fmt.Sprintf("this member's name %s is not published; check -hostname (pod name), -service (the StatefulSet's serviceName), -domain, and that the service sets publishNotReadyAddresses: true", cfg.Self())
	case membership.WaitSize:
		return "fewer peers than -min-peers are visible; wait for the others to start, or lower -min-peers"
	}
	return ""
}
