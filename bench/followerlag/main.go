// Command followerlag measures how long a shared-hosts-file follower
// (-hosts-lease without the Lease, -wait-for-all) takes to notice that the
// writer completed the file: from the writer's write to the follower's next
// sink (its hook) being applied.
//
//	go run ./bench/followerlag [-after 2s,5s,10s,20s]
//
// # Method
//
// In one process, one engine per delay runs peer-finder's pipeline for a
// follower: a static source with every expected member (all addresses
// known), the hosts-file follower, then a recording sink standing for the
// hook. The file does not exist at first; after the delay, the real writer
// (hostsfile.Sink.Apply) writes the complete block. The lag is the
// recording sink's Apply time minus the end of that write. The engines run
// side by side, so the run takes about the longest delay plus its lag.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/flockd/flock/internal/ordinal"
	"github.com/flockd/flock/peerfinder/engine"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
	"github.com/flockd/flock/peerfinder/sink/hostsfile"
	"github.com/flockd/flock/peerfinder/source/static"
)

type recorder struct{ at chan time.Time }

func (r recorder) Apply(context.Context, sink.Delivery) error {
	select {
	case r.at <- time.Now():
	default:
	}
	return nil
}

func member(role, index, ip string) peer.Peer {
	return peer.Peer{FQDN: role + "-" + index + ".train.ns.svc.cluster.local", IPs: []string{ip}, Ordinal: -1, Ready: true,
		Labels: map[string]string{"role": role, ordinal.JobCompletionIndexLabel: index}}
}

func main() {
	after := flag.String("after", "2s,5s,10s,20s", "comma-separated delays before the writer writes")
	flag.Parse()
	var delays []time.Duration
	for s := range strings.SplitSeq(*after, ",") {
		d, err := time.ParseDuration(s)
		if err != nil {
			log.Fatalf("-after: %v", err)
		}
		delays = append(delays, d)
	}
	dir, err := os.MkdirTemp("", "followerlag")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	peers := []peer.Peer{member("ps", "0", "10.0.0.1"), member("worker", "0", "10.0.0.2"), member("worker", "1", "10.0.0.3")}
	lags := make([]time.Duration, len(delays))
	var wg sync.WaitGroup
	for i, d := range delays {
		wg.Go(func() {
			opts := hostsfile.Options{Path: filepath.Join(dir, fmt.Sprint(i)), ID: "train",
				NameTemplate: `{{index .Labels "role"}}-{{.Index}}`, Expected: []string{"ps-0", "worker-0", "worker-1"}, WaitForAll: true}
			writer, err := hostsfile.New(opts)
			if err != nil {
				log.Fatal(err)
			}
			follower, err := hostsfile.New(opts)
			if err != nil {
				log.Fatal(err)
			}
			rec := recorder{at: make(chan time.Time, 1)}
			eng := engine.New(engine.Config{
				Sources: []engine.NamedSource{{Name: "static", Source: static.Source{Peers: peers}}},
				Sinks:   []engine.NamedSink{{Name: "hosts-file", Sink: follower.Follower()}, {Name: "hook", Sink: rec}},
				Once:    true,
			})
			ctx, cancel := context.WithTimeout(context.Background(), d+2*time.Minute)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- eng.Run(ctx) }()
			time.Sleep(d)
			if err := writer.Apply(ctx, sink.Delivery{Set: peer.NewSet(peers...), Generation: 1, First: true}); err != nil {
				log.Fatal(err)
			}
			wrote := time.Now()
			select {
			case at := <-rec.at:
				lags[i] = at.Sub(wrote)
			case <-ctx.Done():
				log.Fatalf("writer after %v: the follower's hook never ran", d)
			}
			<-done
		})
	}
	wg.Wait()
	fmt.Println("writer after   follower lag (write -> hook)")
	for i, d := range delays {
		fmt.Printf("%12v   %v\n", d, lags[i].Round(time.Millisecond))
	}
}
