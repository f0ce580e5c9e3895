package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

// lockFile takes an flock(2) lock of the given kind (syscall.LOCK_EX or LOCK_SH)
// on path, polling until ctx ends. The lock is released by unlock or when the
// process exits, so a crashed holder never leaves a stale lock behind.
func lockFile(ctx context.Context, path string, how int) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for lock %s: %w", path, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// tryLock is lockFile without waiting; ok is false when another holder exists.
func tryLock(path string, how int) (unlock func(), ok bool, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, false, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, true, nil
}

func sortStrings(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// Claim takes the cluster-wide lock name (a file in the state directory)
// for as long as the caller holds it, without waiting; ok is false while
// another process holds it. Tools that change the cluster's own components
// (a campaign rewrites CoreDNS's Corefile and restarts the API server) claim
// it so that two of them never undo each other's changes.
func (s *State) Claim(name string) (release func(), ok bool, err error) {
	return tryLock(filepath.Join(s.StateDir, name+".lock"), syscall.LOCK_EX)
}
