// Package static is a Source that reports a fixed list of peers, or the
// names in a file: for dry runs, tests, and tools that already know the set.
package static

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/flockd/flock/internal/atomicfile"
	"github.com/flockd/flock/internal/ordinal"
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
	// are skipped. Its entries follow the member rule of the DNS source
	// (source.Member): lower-cased, only Service's own members are
	// delivered, ready, with Name the first label and Ordinal by
	// ordinal.FromName; the others are dropped and logged once per
	// change of what is dropped.
	File string
	// Service is the FQDN of the governing service; File needs it.
	Service string
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
	if err := s.check(); err != nil {
		return err
	}
	log := s.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var rejects source.RejectLog
	period := s.Period
	if period <= 0 {
		period = DefaultPeriod
	}
	if s.File == "" {
		period = time.Duration(1<<63 - 1) // a fixed list never changes
	}
	return source.Poll{
		Lookup: func(ctx context.Context, _ peer.Set) (peer.Set, error) {
			set, rejected, err := s.lookup(ctx)
			if err == nil {
				rejects.Log(log, "static file names entries that are not members of the service; not delivered", s.File, rejected)
			}
			return set, err
		},
		Name:    s.File,
		Period:  period,
		Backoff: retry.Backoff{Min: 2 * min(period, maxBackoff/2), Max: maxBackoff},
		Logger:  s.Logger,
	}.Run(ctx, up)
}

// Lookup implements source.Lookuper.
func (s Source) Lookup(ctx context.Context) ([]peer.Peer, error) {
	set, _, err := s.lookup(ctx)
	if err != nil {
		return nil, err
	}
	return source.ClonePeers(set.Peers()), nil
}

// lookup returns Peers, or the members named in File and the entries it
// dropped, sorted. File must be a regular file (a link to one is followed,
// as in a ConfigMap volume) of at most atomicfile.MaxSize bytes: a FIFO
// would block the read and /dev/zero never ends.
func (s Source) lookup(ctx context.Context) (peer.Set, []source.Rejected, error) {
	if s.File == "" {
		return peer.NewSet(s.Peers...), nil, nil
	}
	if err := s.check(); err != nil {
		return peer.Set{}, nil, err
	}
	b, err := atomicfile.ReadRegular(ctx, s.File)
	if err != nil {
		return peer.Set{}, nil, fmt.Errorf("static source: %w", err)
	}
	var (
		peers    []peer.Peer
		rejected []source.Rejected
	)
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, err := source.Member(line, s.Service)
		if err != nil {
			rejected = append(rejected, source.Rejected{Target: line, Reason: err.Error()})
			continue
		}
		fqdn := name + "." + strings.ToLower(strings.TrimSuffix(s.Service, "."))
		peers = append(peers, peer.Peer{FQDN: fqdn, Name: name, Ready: true, Ordinal: ordinal.FromName(name)})
	}
	if err := sc.Err(); err != nil {
		return peer.Set{}, nil, fmt.Errorf("static source: read %s: %w", s.File, err)
	}
	slices.SortFunc(rejected, func(a, b source.Rejected) int { return strings.Compare(a.Target, b.Target) })
	return peer.NewSet(peers...), slices.Compact(rejected), nil
}

// check reports a Source that cannot run.
func (s Source) check() error {
	if s.File != "" && s.Service == "" {
		return errors.New("static source: a file needs the service")
	}
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
