// Package sourcetest runs a source.Source in a test and keeps every
// snapshot it sends, the one harness of the sources' tests (after
// Prometheus' k8sDiscoveryTest): start it, change the world, wait for the
// snapshot that should follow.
package sourcetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/source"
)

// Run is a source running in a test.
type Run struct {
	name string
	mu   sync.Mutex
	all  [][]peer.Peer
}

// Start runs src until the test ends; then it cancels Run, waits for it
// (await.Timeout) and fails the test if Run returned an error.
func Start(t testing.TB, name string, src source.Source) *Run {
	t.Helper()
	r := &Run{name: name}
	ctx, cancel := context.WithCancel(context.Background())
	up := make(chan []peer.Peer)
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, up) }()
	go func() {
		for {
			select {
			case ps := <-up:
				r.mu.Lock()
				r.all = append(r.all, ps)
				r.mu.Unlock()
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		if err := await.Recv(t, done, "%s: Run to return after cancel", name); err != nil {
			t.Errorf("%s: Run: %v", name, err)
		}
	})
	return r
}

// Latest returns the newest snapshot, and false before the first.
func (r *Run) Latest() ([]peer.Peer, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.all) == 0 {
		return nil, false
	}
	return r.all[len(r.all)-1], true
}

// Snapshots returns every snapshot so far, oldest first.
func (r *Run) Snapshots() [][]peer.Peer {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.all)
}

// Wait waits up to timeout until the newest snapshot satisfies ok and
// returns it, or fails the test with what was awaited and the newest
// snapshot's keys.
func (r *Run) Wait(t testing.TB, timeout time.Duration, what string, ok func([]peer.Peer) bool) []peer.Peer {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ps, sent := r.Latest()
		if sent && ok(ps) {
			return ps
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: after %s no snapshot with %s; the newest: %s", r.name, timeout, what, describe(ps, sent))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func describe(ps []peer.Peer, sent bool) string {
	if !sent {
		return "none sent"
	}
	keys := make([]string, len(ps))
	for i, p := range ps {
		keys[i] = p.Key()
	}
	return fmt.Sprint(keys)
}
