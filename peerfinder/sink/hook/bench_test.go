package hook_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
	"github.com/flockd/flock/peerfinder/sink/hook"
)

// richDelivery returns n peers with the fields an EndpointSlice source fills.
func richDelivery(n int) sink.Delivery {
	ps := make([]peer.Peer, n)
	for i := range ps {
		ps[i] = peer.Peer{
			FQDN:    fmt.Sprintf("db-%d.db.default.svc.cluster.local", i),
			Name:    fmt.Sprintf("db-%d", i),
			IPs:     []string{fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)},
			Ready:   true,
			Node:    fmt.Sprintf("node-%d", i%100),
			Zone:    fmt.Sprintf("zone-%d", i%3),
			Ordinal: i,
			Ports:   []peer.Port{{Name: "client", Port: 2181, Protocol: "TCP"}},
		}
	}
	set := peer.NewSet(ps...)
	return sink.Delivery{Set: set, Self: set.Keys()[0], Generation: 1, First: true, Added: set.Keys()}
}

func BenchmarkRender(b *testing.B) {
	d := richDelivery(5000)
	for _, bc := range []struct {
		name    string
		format  hook.Format
		newline bool
	}{
		{"lines-5000", hook.FormatLines, false},
		{"lines-newline-5000", hook.FormatLines, true},
		{"json-5000", hook.FormatJSON, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var n int
			for b.Loop() {
				out, err := hook.Render(d, bc.format, bc.newline)
				if err != nil {
					b.Fatal(err)
				}
				n = len(out)
			}
			b.SetBytes(int64(n))
		})
	}
}

// BenchmarkApply measures one whole hook run with 5,000 peers on stdin:
// render, fork/exec of the test binary, the hook reading all of stdin, wait.
func BenchmarkApply(b *testing.B) {
	d := richDelivery(5000)
	for _, format := range []hook.Format{hook.FormatLines, hook.FormatJSON} {
		b.Run(string(format)+"-5000", func(b *testing.B) {
			h, err := hook.New(hook.Config{
				OnStart: helper("discard"),
				Format:  format,
				Env:     []string{helperEnv + "=1", "GORACE=atexit_sleep_ms=0"},
			})
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if err := h.Apply(context.Background(), d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
