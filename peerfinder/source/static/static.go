// Package static is a Source that reports a fixed list of peers: for dry
// runs, tests, and tools that already know the set.
package static

import (
	"context"
	"slices"

	"github.com/flockd/flock/peerfinder/peer"
)

// Source reports Peers once and then waits for cancellation.
type Source struct {
	Peers []peer.Peer
}

// Run implements source.Source.
func (s Source) Run(ctx context.Context, up chan<- []peer.Peer) error {
	select {
	case up <- slices.Clone(s.Peers):
	case <-ctx.Done():
		return nil
	}
	<-ctx.Done()
	return nil
}

// Names returns peers whose FQDNs are the given names, with Ordinal -1.
func Names(names ...string) []peer.Peer {
	ps := make([]peer.Peer, len(names))
	for i, n := range names {
		ps[i] = peer.Peer{FQDN: n, Ready: true, Ordinal: -1}
	}
	return ps
}
