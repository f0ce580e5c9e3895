package atomicfile

import (
	"bytes"
	"io/fs"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// modeBits are the bits of a file's mode that a replace keeps.
const modeBits = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// tempInfix names the temporary files of replace, ".<name>.flock-tmp<digits>",
// so that removeStale knows them from other programs' ".<name>.tmp123".
const tempInfix = ".flock-tmp"

// umask returns the process's umask, read from /proc/self/status (reading
// it with umask(2) would change it for a moment for every thread), or the
// usual 022 where that file does not say.
func umask() fs.FileMode {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for line := range bytes.Lines(b) {
			if v, ok := bytes.CutPrefix(line, []byte("Umask:")); ok {
				if m, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 8, 32); err == nil {
					return fs.FileMode(m) & fs.ModePerm
				}
			}
		}
	}
	return 0o022
}

// fileSystem is what Write does to the disk: the seam through which tests
// inject faults (ENOSPC, a crash between two steps) and watch the order of
// the steps. osFS is the real one.
type fileSystem interface {
	OpenFile(name string, flag int, perm fs.FileMode) (file, error)
	CreateTemp(dir, pattern string) (file, error)
	Rename(oldpath, newpath string) error
	Remove(name string) error
}

// file is the part of *os.File that Write uses.
type file interface {
	Name() string
	Fd() uintptr
	Stat() (fs.FileInfo, error)
	Write(b []byte) (int, error)
	WriteAt(b []byte, off int64) (int, error)
	Truncate(size int64) error
	Sync() error
	Chmod(mode fs.FileMode) error
	Chown(uid, gid int) error
	Close() error
}

// osFS is the real file system.
type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (file, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return f, nil
}

func (osFS) CreateTemp(dir, pattern string) (file, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (osFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }
func (osFS) Remove(name string) error             { return os.Remove(name) }

// copyXattrs copies the extended attributes of the file at from (user.*,
// ACLs, security labels) to to, best effort: one that the process may not
// set (trusted.* without CAP_SYS_ADMIN, a label the policy forbids) or the
// file system does not take is dropped.
func copyXattrs(from string, to file) {
	names, err := xattr(func(b []byte) (int, error) { return unix.Llistxattr(from, b) })
	if err != nil {
		return
	}
	for name := range bytes.SplitSeq(names, []byte{0}) {
		if len(name) == 0 {
			continue
		}
		value, err := xattr(func(b []byte) (int, error) { return unix.Lgetxattr(from, string(name), b) })
		if err == nil {
			_ = unix.Fsetxattr(int(to.Fd()), string(name), value, 0)
		}
	}
}

// xattr calls get, an xattr call that returns the size needed when given
// no buffer, with a buffer of that size.
func xattr(get func([]byte) (int, error)) ([]byte, error) {
	n, err := get(nil)
	if err != nil || n == 0 {
		return nil, err
	}
	b := make([]byte, n)
	n, err = get(b)
	if err != nil {
		return nil, err
	}
	return b[:n], nil
}
