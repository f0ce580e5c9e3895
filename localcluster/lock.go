package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
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
