package hostsfile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/flockd/flock/internal/atomicfile"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
)

// TestConcurrentWritersOfOneFile runs several sinks, each with its own -hosts-id
// block, writing one real file at once, as several peer-finders (one per
// service) sharing a pod's /etc/hosts do. Every block only grows, so a block
// smaller than what its writer already applied is a lost update: another
// writer put back a stale copy of it.
func TestConcurrentWritersOfOneFile(t *testing.T) {
	for _, mode := range []atomicfile.Mode{atomicfile.Replace, atomicfile.InPlace} {
		t.Run(mode.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "hosts")
			const foreign = "127.0.0.1\tlocalhost\n"
			if err := os.WriteFile(path, []byte(foreign), 0o644); err != nil {
				t.Fatal(err)
			}
			const writers, steps = 4, 40
			var applied [writers]atomic.Int64 // entries in block w that its writer has written
			ids := func(w int) string { return fmt.Sprintf("svc%d", w) }
			var wg sync.WaitGroup
			errs := make(chan error, writers)
			for w := range writers {
				s, err := New(Options{Path: path, ID: ids(w), WriteMode: mode})
				if err != nil {
					t.Fatal(err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					var members []peer.Peer
					for n := 1; n <= steps; n++ {
						members = append(members, sts(fmt.Sprintf("%s-%d", ids(w), n-1), n-1, fmt.Sprintf("10.%d.0.%d", w, n)))
						if err := s.Apply(context.Background(), sink.Delivery{Set: peer.NewSet(members...), Generation: uint64(n)}); err != nil {
							errs <- fmt.Errorf("writer %d step %d: %w", w, n, err)
							return
						}
						applied[w].Store(int64(n))
						// Whatever every writer has applied so far must be in the file.
						var want [writers]int64
						for i := range writers {
							want[i] = applied[i].Load()
						}
						if err := checkBlocks(path, ids, want[:]); err != nil {
							errs <- fmt.Errorf("writer %d after step %d: %w", w, n, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			want := make([]int64, writers)
			for i := range want {
				want[i] = steps
			}
			if err := checkBlocks(path, ids, want); err != nil {
				t.Errorf("final file: %v", err)
			}
			b, _ := os.ReadFile(path)
			if len(b) < len(foreign) || string(b[:len(foreign)]) != foreign {
				t.Errorf("foreign line lost:\n%s", b)
			}
		})
	}
}

// checkBlocks fails when block ids(i) of the file at path has fewer than
// want[i] entries.
func checkBlocks(path string, ids func(int) string, want []int64) error {
	b, err := atomicfile.ReadFile(context.Background(), path) // under the shared lock: no half-done in-place rewrite
	if err != nil {
		return err
	}
	for i, w := range want {
		entries, found, err := ReadBlock(b, ids(i))
		if err != nil {
			return fmt.Errorf("block %s: %w", ids(i), err)
		}
		if w > 0 && (!found || int64(len(entries)) < w) {
			return fmt.Errorf("block %s holds %d entries, its writer already wrote %d: lost update", ids(i), len(entries), w)
		}
	}
	return nil
}
