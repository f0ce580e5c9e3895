package atomicfile

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/flockd/flock/internal/testing/await"
)

// nonRegular makes a file of the named kind at path: a FIFO, a unix
// socket, a directory, or (root only) a character device like /dev/null.
func nonRegular(t *testing.T, kind, path string) {
	t.Helper()
	switch kind {
	case "fifo":
		if err := syscall.Mkfifo(path, 0o644); err != nil {
			t.Fatal(err)
		}
	case "socket":
		l, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		l.(*net.UnixListener).SetUnlinkOnClose(false)
		t.Cleanup(func() { l.Close() })
	case "directory":
		if err := os.Mkdir(path, 0o755); err != nil {
			t.Fatal(err)
		}
	case "char-device":
		if os.Geteuid() != 0 {
			t.Skip("needs root to make a device node")
		}
		if err := syscall.Mknod(path, syscall.S_IFCHR|0o666, 1<<8|3); err != nil { // 1:3, /dev/null
			t.Skipf("mknod: %v", err)
		}
	default:
		t.Fatalf("unknown kind %q", kind)
	}
}

// TestNonRegularTargetIsRefused: a FIFO, a socket, a directory or a device
// at a sink's path is refused by Update and ReadFile with an error naming
// the file, at once and without opening it for reading (a FIFO blocked the
// reader for ever, under the file's lock), and the node is left as it was
// (issue 36 #8).
func TestNonRegularTargetIsRefused(t *testing.T) {
	for _, kind := range []string{"fifo", "socket", "directory", "char-device"} {
		for _, op := range []string{"Update", "ReadFile"} {
			t.Run(kind+"/"+op, func(t *testing.T) {
				dir := t.TempDir()
				path := filepath.Join(dir, "hosts")
				nonRegular(t, kind, path)
				before, err := os.Lstat(path)
				if err != nil {
					t.Fatal(err)
				}
				called := false
				done := make(chan error, 1)
				go func() {
					var err error
					if op == "Update" {
						_, err = Update(context.Background(), path, 0o644, Auto, func([]byte) ([]byte, error) {
							called = true
							return []byte("127.0.0.1\tlocalhost\n"), nil
						})
					} else {
						_, err = ReadFile(context.Background(), path)
					}
					done <- err
				}()
				err = await.Recv(t, done, "%s of a %s to return", op, kind)
				if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), path) {
					t.Errorf("%s = %v; want an error wrapping ErrNotRegular naming %s", op, err, path)
				}
				if called {
					t.Errorf("fn ran for a %s", kind)
				}
				after, err := os.Lstat(path)
				if err != nil || after.Mode().Type() != before.Mode().Type() || !os.SameFile(before, after) {
					t.Errorf("the %s was replaced or removed (err %v)", kind, err)
				}
				assertNoTemp(t, dir)
			})
		}
	}
}

// TestTargetLargerThanMaxSizeIsRefused: a target larger than MaxSize is not
// read (a 200 MB hosts file drove RSS to 1.19 GB) and an Update fails with
// ErrTooLarge naming the file, leaving it untouched; content larger than
// MaxSize is not written by Update either, so what a sink writes can be
// read back; Write, for build artefacts, has no cap (issue 36 #9).
func TestTargetLargerThanMaxSizeIsRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hosts")
	big := append(bytes.Repeat([]byte("# padding\n"), MaxSize/10+1), "tail\n"...)
	if err := os.WriteFile(path, big, 0o644); err != nil {
		t.Fatal(err)
	}
	called := false
	_, err := Update(context.Background(), path, 0o644, Auto, func([]byte) ([]byte, error) {
		called = true
		return []byte("small\n"), nil
	})
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), path) {
		t.Errorf("Update of a %d-byte file = %v; want an error wrapping ErrTooLarge naming %s", len(big), err, path)
	}
	if called {
		t.Error("fn ran with a file larger than MaxSize")
	}
	if _, err := ReadFile(context.Background(), path); !errors.Is(err, ErrTooLarge) {
		t.Errorf("ReadFile of a %d-byte file = %v; want ErrTooLarge", len(big), err)
	}
	if b, err := os.ReadFile(path); err != nil || !bytes.Equal(b, big) {
		t.Errorf("the file changed: %d bytes (err %v), want the %d it had", len(b), err, len(big))
	}

	small := filepath.Join(dir, "small")
	if _, err := Update(context.Background(), small, 0o644, Auto, func([]byte) ([]byte, error) { return big, nil }); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Update writing %d bytes = %v; want ErrTooLarge", len(big), err)
	}
	if _, err := os.Stat(small); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file larger than MaxSize was written (err %v)", err)
	}
	// Write, for build artefacts (image archives), has no cap.
	if _, err := Write(small, big, 0o644, Auto); err != nil {
		t.Errorf("Write of %d bytes = %v", len(big), err)
	}
	if _, err := Write(path, append(big, "more\n"...), 0o644, Auto); err != nil {
		t.Errorf("Write over a %d-byte file = %v", len(big), err)
	}
	if err := os.Remove(small); err != nil {
		t.Fatal(err)
	}
	assertNoTemp(t, dir)
}
