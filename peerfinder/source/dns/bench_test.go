package dns

import (
	"context"
	"fmt"
	"testing"

	"github.com/flockd/flock/internal/testing/dnstest"
)

// BenchmarkLookup measures one Lookup against the loopback server: the query,
// TCP (first, once an answer needed it) where the answer overflows 4096 bytes of UDP (100 and more
// peers), and parsing into peers.
func BenchmarkLookup(b *testing.B) {
	for _, n := range []int{10, 100, 500, 1000} {
		b.Run(fmt.Sprintf("peers=%d", n), func(b *testing.B) {
			s := dnstest.New(b)
			s.Peers(svc, "web", n, 80)
			src, err := New(Config{Name: svc, Servers: []string{s.Addr()}})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				ps, err := src.Lookup(ctx)
				if err != nil || len(ps) != n {
					b.Fatalf("got %d peers, err %v", len(ps), err)
				}
			}
			b.ReportMetric(float64(s.Queries("tcp"))/float64(b.N), "tcp/op")
		})
	}
}
