// Package static is a Source that reports a fixed list of peers, or the
// names in a file: for dry runs, tests, and tools that already know the set.
package static

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/flockd/flock/internal/retry"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/source"
)

// DefaultPeriod is how often File is read again when Period is zero.
const DefaultPeriod = time.Second

// maxBackoff caps the pause between reads of a File that cannot be read.
const maxBackoff = 15 * time.Second

// Source reports Peers, or with File set the peers named in that file, read
// again every Period. It follows the source.Source contract through
// source.Poll: a set is sent first and again when it changes; a file that
// cannot be read sends nothing and keeps the last set.
type Source struct {
	// Peers is the fixed list, used when File is empty.
	Peers []peer.Peer
	// File holds one FQDN per line; blank lines and lines starting with '#'
	// are skipped. Its peers are ready, with Ordinal -1.
	File string
	// Period is the pause between reads of File (DefaultPeriod).
	Period time.Duration
	// Logger receives the failing/recovered records; nil discards them.
	Logger *slog.Logger
}

var (
	_ source.Source   = Source{}
	_ source.Lookuper = Source{}
)

// Run implements source.Source.
func (s Source) Run(ctx context.Context, up chan<- []peer.Peer) error {
	period := s.Period
	if period <= 0 {
		period = DefaultPeriod
	}
	if s.File == "" {
		period = time.Duration(1<<63 - 1) // a fixed list never changes
	}
	return source.Poll{
		Lookup:  func(context.Context, peer.Set) (peer.Set, error) { return s.lookup() },
		Name:    s.File,
		Period:  period,
		Backoff: retry.Backoff{Min: 2 * min(period, maxBackoff/2), Max: maxBackoff},
		Logger:  s.Logger,
	}.Run(ctx, up)
}

// Lookup implements source.Lookuper.
func (s Source) Lookup(context.Context) ([]peer.Peer, error) {
	set, err := s.lookup()
	if err != nil {
		return nil, err
	}
	return source.ClonePeers(set.Peers()), nil
}

func (s Source) lookup() (peer.Set, error) {
	if s.File == "" {
		return peer.NewSet(s.Peers...), nil
	}
	b, err := os.ReadFile(s.File)
	if err != nil {
		return peer.Set{}, fmt.Errorf("static source: %w", err)
	}
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			names = append(names, line)
		}
	}
	if err := sc.Err(); err != nil {
		return peer.Set{}, fmt.Errorf("static source: read %s: %w", s.File, err)
	}
	return peer.NewSet(Names(names...)...), nil
}

// Names returns peers whose FQDNs are the given names, with Ordinal -1.
func Names(names ...string) []peer.Peer {
	ps := make([]peer.Peer, len(names))
	for i, n := range names {
		ps[i] = peer.Peer{FQDN: n, Ready: true, Ordinal: -1}
	}
	return ps
}
