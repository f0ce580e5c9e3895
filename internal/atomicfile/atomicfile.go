// Package atomicfile writes whole files so that readers never see a partial
// or stale-tailed result, and skips the write when the bytes are unchanged.
//
// The normal path is the classic atomic replace: a temporary file in the same
// directory, fsync, rename over the target, fsync of the directory. Renaming
// over a mount point fails with EBUSY — the kubelet bind-mounts /etc/hosts
// into every container — and a read-only root file system may forbid the
// temporary file while the target itself is writable. For those targets the
// content is rewritten in place: the space a longer content needs is reserved
// first (the old content padded with newlines), so a full disk fails the
// write before anything is overwritten; then one write at offset 0 whose
// tail, when the new content is shorter, is padded with newlines so the file
// is complete at every moment; then a truncate to the exact length and an
// fsync. In-place mode is therefore meant for line-oriented text (hosts
// files, JSON), where trailing blank lines are harmless even if the process
// dies between two steps.
//
// The target's directory may be shared with writers that are not trusted
// (an emptyDir, a hostPath); the path up to it is trusted. So the target
// must be a regular file or not exist: a symbolic link at the path is never
// followed (O_NOFOLLOW, after an lstat), a FIFO or device is never opened
// for reading, and temporary files are made only in the target's
// directory; anything else fails with ErrNotRegular, and a target with a
// second name (a hard link) with ErrHardLinked.
package atomicfile

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Mode selects how a file is replaced.
type Mode int

const (
	// Auto replaces atomically and falls back to an in-place rewrite when the
	// target cannot be renamed over (EBUSY: a mount point) or no temporary
	// file can be created next to an existing, writable target.
	Auto Mode = iota
	// Replace only replaces atomically (temp file + rename); it never rewrites
	// in place.
	Replace
	// InPlace always rewrites the existing file in place (the file is created
	// when missing).
	InPlace
)

// String returns the flag spelling of the mode.
func (m Mode) String() string {
	switch m {
	case Auto:
		return "auto"
	case Replace:
		return "replace"
	case InPlace:
		return "in-place"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ParseMode parses "auto", "replace" or "in-place".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "auto", "":
		return Auto, nil
	case "replace":
		return Replace, nil
	case "in-place", "inplace":
		return InPlace, nil
	}
	return Auto, fmt.Errorf("unknown write mode %q (want auto, replace or in-place)", s)
}

// Result tells what Write did.
type Result int

const (
	// Unchanged means the file already held the bytes; nothing was written.
	Unchanged Result = iota
	// Replaced means the file was atomically replaced (or created).
	Replaced
	// Rewritten means the file was rewritten in place.
	Rewritten
)

// String returns a lower-case name for logs.
func (r Result) String() string {
	switch r {
	case Unchanged:
		return "unchanged"
	case Replaced:
		return "replaced"
	case Rewritten:
		return "rewritten"
	}
	return fmt.Sprintf("Result(%d)", int(r))
}

// WriteFile writes data to path in Auto mode unless the file already holds
// exactly data. perm, less the umask, applies to a newly created file; an
// existing file keeps its mode.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	_, err := Write(path, data, perm, Auto)
	return err
}

// Write writes data to path with the given mode unless the file already holds
// exactly data, and reports what it did, without the cap of MaxSize (it
// writes build artefacts). path must be a regular file or not exist: a
// symbolic link is not followed, anything but a regular file is refused
// (ErrNotRegular), and so is a file with another name (ErrHardLinked).
// perm, less the umask, applies to a newly created file; an existing file
// keeps its mode bits, setuid, setgid and sticky included, its extended
// attributes and, when running as root, its owner.
func Write(path string, data []byte, perm fs.FileMode, mode Mode) (Result, error) {
	return writer{fs: osFS{}, limit: noLimit}.write(context.Background(), path, data, perm, mode)
}

// writer performs the writes through fs, the seam for fault injection.
type writer struct {
	fs       fileSystem
	lockWait time.Duration // the bound of a wait for a lock; LockWait when zero
	limit    int64         // the most read or written; MaxSize when zero
}

// std writes to the real file system.
var std = writer{fs: osFS{}}

func (w writer) write(ctx context.Context, path string, data []byte, perm fs.FileMode, mode Mode) (Result, error) {
	limit := cmp.Or(w.limit, MaxSize)
	if int64(len(data)) > limit {
		return Unchanged, fmt.Errorf("write %s: %d bytes: %w", path, len(data), ErrTooLarge)
	}
	old, err := read(ctx, path, false, limit)
	exists := err == nil
	switch {
	case exists && bytes.Equal(old, data):
		return Unchanged, nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return Unchanged, err
	}
	if mode == InPlace {
		return Rewritten, w.rewrite(path, data, perm)
	}
	err = w.replace(path, data, perm)
	if err == nil {
		return Replaced, nil
	}
	if mode == Auto && exists && fallback(err) {
		if err := w.rewrite(path, data, perm); err != nil {
			return Rewritten, err
		}
		return Rewritten, nil
	}
	return Replaced, err
}

// fallback reports whether a failed atomic replace should be retried in place:
// EBUSY from rename over a mount point, or a directory that does not allow a
// temporary file (read-only root file system, no write permission).
func fallback(err error) bool {
	return errors.Is(err, syscall.EBUSY) || errors.Is(err, syscall.EROFS) ||
		errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) ||
		errors.Is(err, syscall.EXDEV)
}

// replace writes data to a temporary file next to path, fsyncs it, renames it
// over path and fsyncs the directory. The temporary file is removed on error.
// The new file gets the mode bits of the file it replaces, setuid, setgid and
// sticky included, its owner when running as root, and its extended
// attributes (copyXattrs), or perm without the umask's bits when there was
// none.
func (w writer) replace(path string, data []byte, perm fs.FileMode) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := w.fs.CreateTemp(dir, "."+base+tempInfix+"*")
	if err != nil {
		return fmt.Errorf("create temporary file for %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = w.fs.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	// After the write, which clears setuid and setgid for a writer without
	// CAP_FSETID, and the chown, which clears them always.
	if fi, statErr := os.Lstat(path); statErr == nil {
		perm = fi.Mode() & modeBits // setuid, setgid and sticky too
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 {
			_ = f.Chown(int(st.Uid), int(st.Gid)) // best effort: keep the owner
		}
		copyXattrs(path, f)
	} else {
		perm = perm.Perm() &^ umask() // as open(2) would create it
	}
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("chmod %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := w.fs.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s over %s: %w", tmp, path, err)
	}
	if d, err := w.fs.OpenFile(dir, os.O_RDONLY, 0); err == nil {
		_ = d.Sync() // durability of the rename; not all file systems support it
		_ = d.Close()
	}
	return nil
}

// rewrite replaces the content of path in place so that the file is whole
// at every step and a write that cannot complete leaves the old content:
//
//  1. when data is longer than the file, the space is reserved first by
//     padding the old content with newlines up to len(data); if that fails
//     (ENOSPC, quota) the padding is cut off again and nothing else changed;
//  2. one write at offset 0 of data padded with newlines up to the current
//     size, over blocks the file already owns (so the file is never shorter
//     than its content nor carries a stale tail);
//  3. a truncate to len(data) and an fsync.
//
// A process that dies between two steps leaves the old or the new content
// followed by blank lines.
func (w writer) rewrite(path string, data []byte, perm fs.FileMode) error {
	f, err := w.fs.OpenFile(path, os.O_RDWR|os.O_CREATE|openFlags, perm)
	if err != nil {
		return openError("open for in-place rewrite", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	if err := checkRegular(path, fi); err != nil {
		return err
	}
	if err := checkLinks(path, fi); err != nil {
		return err
	}
	size := fi.Size()
	if grow := int64(len(data)) - size; grow > 0 {
		if _, err := f.WriteAt(bytes.Repeat([]byte{'\n'}, int(grow)), size); err != nil {
			_ = f.Truncate(size) // give the reserved space back; the old content is untouched
			return fmt.Errorf("reserve %d bytes for %s: %w", len(data), path, err)
		}
	}
	buf := data
	if size > int64(len(data)) {
		buf = make([]byte, size)
		copy(buf, data)
		for i := len(data); i < len(buf); i++ {
			buf[i] = '\n'
		}
	}
	if _, err := f.WriteAt(buf, 0); err != nil {
		return fmt.Errorf("rewrite %s: %w", path, err)
	}
	if size > int64(len(data)) {
		if err := f.Truncate(int64(len(data))); err != nil {
			return fmt.Errorf("truncate %s: %w", path, err)
		}
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	return nil
}
