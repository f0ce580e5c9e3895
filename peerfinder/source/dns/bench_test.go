package dns

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/flockd/flock/internal/testing/dnstest"
)

// BenchmarkLookup measures one Lookup against the loopback server: the query,
// TCP (first, once an answer needed it) where the answer overflows 4096 bytes of UDP (100 and more
// peers), and parsing into peers (parsed/op: the answers not skipped as
// unchanged). With shuffled, the server orders its
// records anew for every answer, as CoreDNS does, so at 1,000 peers each
// answer carries a different part of the glue.
func BenchmarkLookup(b *testing.B) {
	for _, bc := range []struct {
		peers    int
		shuffled bool
	}{{10, false}, {100, false}, {500, false}, {1000, false}, {1000, true}} {
		name := fmt.Sprintf("peers=%d", bc.peers)
		if bc.shuffled {
			name += "/shuffled"
		}
		b.Run(name, func(b *testing.B) {
			s := dnstest.New(b)
			s.Peers(svc, "web", bc.peers, 80)
			s.SetShuffle(bc.shuffled)
			m := NewMetrics(nil)
			src, err := New(Config{Name: svc, Servers: []string{s.Addr()}, Metrics: m})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				ps, err := src.Lookup(ctx)
				if err != nil || len(ps) != bc.peers {
					b.Fatalf("got %d peers, err %v", len(ps), err)
				}
			}
			b.ReportMetric(float64(s.Queries("tcp"))/float64(b.N), "tcp/op")
			b.ReportMetric(1-testutil.ToFloat64(m.Unchanged)/float64(b.N), "parsed/op")
		})
	}
}
