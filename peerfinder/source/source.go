// Package source defines where peers come from. Each subpackage implements
// Source for one origin (DNS, EndpointSlices, pods, a static list).
package source

import (
	"context"

	"github.com/flockd/flock/peerfinder/peer"
)

// Source discovers the members of a workload.
//
// Run sends a complete snapshot of the peers it sees on up as soon as it has
// an authoritative answer, and again whenever that answer changes. A failed
// lookup sends nothing: the consumer keeps the last snapshot ("no news");
// only an authoritative answer (e.g. NXDOMAIN from every server) sends an
// empty snapshot. Run blocks until ctx is done, never closes up, and returns
// nil on cancellation or an error when it cannot run at all (bad config).
// Snapshots are owned by the receiver after sending.
type Source interface {
	Run(ctx context.Context, up chan<- []peer.Peer) error
}

// Lookuper is an optional capability of a Source: one synchronous lookup of
// the current snapshot, for tests and tools. An error means the source
// could not tell (the same case in which Run sends nothing). peer-finder's
// diagnose mode does not use it: it reads the engine's first evaluation,
// so it sees what Run sends.
type Lookuper interface {
	Lookup(ctx context.Context) ([]peer.Peer, error)
}
