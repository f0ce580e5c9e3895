package atomicfile

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Update serializes the writers of one file: it takes an exclusive flock(2)
// lock, reads the current content (nil when the file does not exist), and
// writes what fn returns with the given mode unless it equals the current
// content. fn runs under the lock, so a change computed from the content
// never puts back another writer's stale copy (several peer-finders, one per
// service, each owning a block of one hosts file).
//
// The lock is on the file itself, so it works where no file can be created
// next to it (the kubelet's bind-mounted /etc/hosts, shared by every
// container of a pod) and across the containers that share it. Because a
// replace renames a new file over the locked one, Update checks after
// locking that path still names the locked file and otherwise locks again.
// While the file does not exist, its directory is locked instead. Waiting for
// the lock ends with ctx, or after LockWait with an error wrapping ErrLocked
// that names path. File systems without flock support are written without a
// lock.
func Update(ctx context.Context, path string, perm fs.FileMode, mode Mode, fn func(current []byte) ([]byte, error)) (Result, error) {
	return std.update(ctx, path, perm, mode, fn)
}

func (w writer) update(ctx context.Context, path string, perm fs.FileMode, mode Mode, fn func([]byte) ([]byte, error)) (Result, error) {
	unlock, held, err := w.lock(ctx, path, syscall.LOCK_EX)
	if err != nil {
		return Unchanged, err
	}
	defer unlock()
	if held {
		w.removeStale(path)
	}
	current, err := read(ctx, path, false, cmp.Or(w.limit, MaxSize))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Unchanged, err
	}
	data, err := fn(current)
	if err != nil {
		return Unchanged, err
	}
	return w.write(ctx, path, data, perm, mode)
}

// ReadFile reads path under a shared lock, so it never sees an in-place
// rewrite by Update half done. It waits for the lock as Update does. Like
// Update it reads only a regular file (ErrNotRegular) of at most MaxSize
// bytes (ErrTooLarge).
func ReadFile(ctx context.Context, path string) ([]byte, error) {
	unlock, _, err := std.lock(ctx, path, syscall.LOCK_SH)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return ReadTarget(ctx, path)
}

// LockWait bounds the wait for a file's lock in Update and ReadFile. Writers
// hold it for milliseconds, so a lock held longer is someone else's (an
// operator's `flock -x hosts sleep 30`, a hung process): the call fails
// after LockWait, so that the caller can report it and go on, instead of
// waiting as long as that holder likes.
const LockWait = 5 * time.Second

// ErrLocked is wrapped by the error of Update and ReadFile when the file's
// lock was still held by another writer after LockWait.
var ErrLocked = errors.New("held by another writer")

// lock takes a flock(2) lock of kind how on path, or on its directory while
// path does not exist, and returns the function that releases it; held is
// false when the file system has no locks and nothing was locked. It waits
// for the lock until ctx ends or for the writer's lockWait (LockWait when
// zero) at most.
func (w writer) lock(ctx context.Context, path string, how int) (unlock func(), held bool, err error) {
	wait := cmp.Or(w.lockWait, LockWait)
	ctx, cancel := context.WithTimeoutCause(ctx, wait, fmt.Errorf("%w for %v", ErrLocked, wait))
	defer cancel()
	for {
		f, missing, err := w.openForLock(path)
		if err != nil {
			return nil, false, err
		}
		if err := flock(ctx, f, how); err != nil {
			_ = f.Close()
			if unsupported(err) {
				return func() {}, false, nil
			}
			return nil, false, fmt.Errorf("lock %s: %w", path, err)
		}
		if lockedIsCurrent(f, path, missing) {
			return func() { _ = f.Close() }, true, nil // closing releases the lock
		}
		_ = f.Close() // replaced or created meanwhile: lock the new one
	}
}

// openForLock opens path for locking: read-write where allowed (NFS needs a
// writable descriptor for an exclusive lock), else read-only; its directory
// when path does not exist. Anything but a regular file fails with
// ErrNotRegular, checked before the open (a device is never opened) and
// after it.
func (w writer) openForLock(path string) (f file, missing bool, err error) {
	if fi, err := os.Lstat(path); err == nil {
		if err := checkRegular(path, fi); err != nil {
			return nil, false, err
		}
	}
	f, err = w.fs.OpenFile(path, os.O_RDWR|openFlags, 0)
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
		f, err = w.fs.OpenFile(path, os.O_RDONLY|openFlags, 0)
	}
	if errors.Is(err, fs.ErrNotExist) {
		f, err = w.fs.OpenFile(filepath.Dir(path), os.O_RDONLY, 0)
		missing = true
	}
	if err != nil {
		return nil, false, openError("open to lock", path, err)
	}
	if !missing {
		fi, err := f.Stat()
		if err == nil {
			err = checkRegular(path, fi)
		}
		if err != nil {
			_ = f.Close()
			return nil, false, err
		}
	}
	return f, missing, nil
}

// lockedIsCurrent reports whether the locked f is still what path names: the
// same inode, or, when the directory was locked, still no file.
func lockedIsCurrent(f file, path string, missing bool) bool {
	fi, err := os.Lstat(path)
	if missing {
		return errors.Is(err, fs.ErrNotExist)
	}
	if err != nil {
		return false
	}
	locked, err := f.Stat()
	return err == nil && os.SameFile(fi, locked)
}

// flock takes the lock without blocking the goroutine past ctx: it retries a
// non-blocking attempt with a growing pause (1 ms to 50 ms), and returns
// ctx's cause when ctx ends first.
func flock(ctx context.Context, f file, how int) error {
	pause := time.Millisecond
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil || !errors.Is(err, syscall.EWOULDBLOCK) {
			return err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		case <-t.C:
		}
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// unsupported reports whether a flock error means the file system has no
// locks (some FUSE and network file systems), not that the lock is held.
func unsupported(err error) bool {
	return errors.Is(err, syscall.ENOLCK) || errors.Is(err, syscall.EOPNOTSUPP) ||
		errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.EINVAL)
}

// removeStale removes the temporary files of path that a writer killed
// between creating and renaming one left behind: regular files named as
// replace names them (".<name>.flock-tmp<digits>") and owned by this
// process's user, never another program's ".<name>.tmp123" or another
// user's file. It must run under path's exclusive lock: writers create
// their temporary file only while holding it, so one seen then belongs to a
// writer that is gone. Best effort: a file that cannot be removed stays.
func (w writer) removeStale(path string) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	prefix := "." + base + tempInfix
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || rest == "" || strings.Trim(rest, "0123456789") != "" || !e.Type().IsRegular() {
			continue
		}
		if fi, err := e.Info(); err == nil && owned(fi) {
			_ = w.fs.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// owned reports whether this process's effective user owns fi.
func owned(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}
