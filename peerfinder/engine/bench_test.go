package engine

import (
	"context"
	"fmt"
	"testing"

	"github.com/flockd/flock/peerfinder/membership"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
)

// BenchmarkChange5000 measures one change of a 5,000-peer set through the
// engine: a source snapshot in, membership gates, diff, and the delivery of
// the whole set to a sink.
func BenchmarkChange5000(b *testing.B) {
	sets := [2][]peer.Peer{}
	for v := range sets {
		for i := range 5000 {
			name := fmt.Sprintf("web-%d", i)
			if i == 4999 && v == 1 {
				name = "web-new"
			}
			sets[v] = append(sets[v], peer.Peer{FQDN: name + ".web.ns.svc.cluster.local", Name: name,
				IPs: []string{fmt.Sprintf("10.%d.%d.%d", i>>16&0xff, i>>8&0xff, i&0xff)}, Ready: true, Ordinal: i})
		}
	}
	src := chanSource{in: make(chan []peer.Peer)}
	rec := &recorder{events: make(chan sink.Delivery, 1)}
	e := New(Config{
		Sources:    []NamedSource{{"test", src}},
		Sinks:      []NamedSink{{"rec", rec}},
		Membership: membership.Options{Self: "web-0.web.ns.svc.cluster.local", MinPeers: 5000},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.Run(ctx) }()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		src.in <- sets[i%2]
		d := <-rec.events
		if d.Set.Len() != 5000 {
			b.Fatalf("delivered %d peers", d.Set.Len())
		}
		rec.mu.Lock()
		rec.got = rec.got[:0]
		rec.mu.Unlock()
		i++
	}
	b.StopTimer()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
