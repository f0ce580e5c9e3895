package atomicfile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// MaxSize caps what Update, ReadFile, ReadTarget and ReadRegular read of a
// file and what Update writes (Write, for build artefacts, has no cap), so
// that a file that grew by mistake or by malice (a 200 MB hosts file,
// /dev/zero) fails its reader instead of taking the process's memory:
// 16 MiB, about 30 times the hosts file (with an FQDN alias) and 14 times
// the JSON document of 10,000 peers.
const MaxSize = 16 << 20

// ErrNotRegular is wrapped by the error for a path that names no regular
// file: a FIFO (whose read would block for ever), a device (/dev/zero
// never ends), a socket or a directory. Such a path is neither opened for
// reading nor replaced.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is wrapped by the error for a file, or content to write,
// larger than MaxSize.
var ErrTooLarge = fmt.Errorf("larger than the %d MiB cap", MaxSize>>20)

// noLimit is the limit of Write, which has no cap.
const noLimit = 1 << 62

// openFlags are added to every open of a target: O_NOFOLLOW so that a link
// planted after the check is not followed, O_NONBLOCK so that the open
// itself cannot block on a FIFO that appeared after the check.
const openFlags = syscall.O_NOFOLLOW | syscall.O_NONBLOCK

// ReadRegular reads the regular file at path, following symbolic links
// (the files of a ConfigMap volume are links), for an input such as
// -static-file: anything but a regular file fails with ErrNotRegular, a
// file larger than MaxSize with ErrTooLarge, and the read stops when ctx
// ends.
func ReadRegular(ctx context.Context, path string) ([]byte, error) {
	return read(ctx, path, true, MaxSize)
}

// ReadTarget reads path as Update does, but without its lock: for a cheap
// check that the content is still there (the hosts file's keep loop).
// Anything but a regular file, a symbolic link included, fails with
// ErrNotRegular, a file with another name with ErrHardLinked, a file larger
// than MaxSize with ErrTooLarge.
func ReadTarget(ctx context.Context, path string) ([]byte, error) {
	return read(ctx, path, false, MaxSize)
}

// read reads path after checking that it is a regular file, before the open
// (a device is never opened) and after it (the file may have been swapped).
// At most limit bytes are read.
func read(ctx context.Context, path string, follow bool, limit int64) ([]byte, error) {
	stat, flags := os.Lstat, os.O_RDONLY|openFlags
	if follow {
		stat, flags = os.Stat, flags&^syscall.O_NOFOLLOW
	}
	fi, err := stat(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if err := checkRegular(path, fi); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, flags, 0)
	if err != nil {
		return nil, openError("read", path, err)
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	if err := checkRegular(path, fi); err != nil {
		return nil, err
	}
	if !follow {
		if err := checkLinks(path, fi); err != nil {
			return nil, err
		}
	}
	return readCapped(ctx, f, path, fi.Size(), limit)
}

// readCapped reads f, of the given size when it was opened, in chunks,
// checking ctx between them, and fails with ErrTooLarge past limit.
func readCapped(ctx context.Context, f io.Reader, path string, size, limit int64) ([]byte, error) {
	if size > limit {
		return nil, fmt.Errorf("read %s: %d bytes: %w", path, size, ErrTooLarge)
	}
	var buf bytes.Buffer
	buf.Grow(int(size) + bytes.MinRead)
	r := io.LimitReader(f, limit+1)
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		_, err := io.CopyN(&buf, r, 1<<20)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
	}
	if int64(buf.Len()) > limit {
		return nil, fmt.Errorf("read %s: more than %d bytes: %w", path, limit, ErrTooLarge)
	}
	return buf.Bytes(), nil
}

// checkRegular fails with ErrNotRegular naming path and what it is unless fi
// is a regular file.
func checkRegular(path string, fi fs.FileInfo) error {
	switch {
	case fi.Mode().IsRegular():
		return nil
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s is a symbolic link, not followed (name the file itself): %w", path, ErrNotRegular)
	}
	return fmt.Errorf("%s is a %s: %w", path, kind(fi.Mode()), ErrNotRegular)
}

// openError wraps the error of an open of path for what: ELOOP, a link met
// by O_NOFOLLOW (planted after the check), is ErrNotRegular.
func openError(what, path string, err error) error {
	if errors.Is(err, syscall.ELOOP) {
		return fmt.Errorf("%s %s: a symbolic link, not followed: %w", what, path, ErrNotRegular)
	}
	return fmt.Errorf("%s %s: %w", what, path, err)
}

// kind names the type of a file that is not regular.
func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	case m.IsDir():
		return "directory"
	}
	return "special file"
}

// ErrHardLinked is wrapped by the error for a target with more than one
// name (hard link): a replace would leave the other names with the old
// content, and a rewrite in place would write through a name that someone
// else may have made, as a symbolic link would.
var ErrHardLinked = errors.New("more than one hard link")

// checkLinks fails with ErrHardLinked naming path unless fi, a target, has
// one name.
func checkLinks(path string, fi fs.FileInfo) error {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
		return fmt.Errorf("%s has %d names: %w (give the file one name)", path, st.Nlink, ErrHardLinked)
	}
	return nil
}
