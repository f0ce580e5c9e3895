package atomicfile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/internal/testing/need"
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
		need.Root(t, "to make a device node")
		if err := syscall.Mknod(path, syscall.S_IFCHR|0o666, 1<<8|3); err != nil { // 1:3, /dev/null
			need.Unavailable(t, "root", fmt.Sprintf("mknod: %v", err))
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

// TestSymlinkTargetIsRefused: a symbolic link at the path, as a co-tenant of
// a shared directory (an emptyDir, a hostPath) could plant, is never
// followed, in any mode: a link to a shadow-like file in another directory
// leaves that file as it was (a root writer replaced it whole, mode and
// owner kept, or appended to it), a dangling link creates nothing (in place
// it created its target anywhere as 0644 root), and the link itself stays
// (issue 36 #7).
func TestSymlinkTargetIsRefused(t *testing.T) {
	const secret = "root:$6$salt$hash:19000:0:99999:7:::\n"
	for _, mode := range []Mode{Auto, Replace, InPlace} {
		for _, dangling := range []bool{false, true} {
			name := mode.String()
			if dangling {
				name += "/dangling"
			}
			t.Run(name, func(t *testing.T) {
				shared, elsewhere := t.TempDir(), t.TempDir()
				shadow := filepath.Join(elsewhere, "shadow")
				if !dangling {
					if err := os.WriteFile(shadow, []byte(secret), 0o640); err != nil {
						t.Fatal(err)
					}
				}
				path := filepath.Join(shared, "peers.json")
				if err := os.Symlink(shadow, path); err != nil {
					t.Fatal(err)
				}
				called := false
				_, err := Update(context.Background(), path, 0o644, mode, func([]byte) ([]byte, error) {
					called = true
					return []byte("{}\n"), nil
				})
				if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "symbolic link") {
					t.Errorf("Update through a link = %v; want an error wrapping ErrNotRegular naming %s as a symbolic link", err, path)
				}
				if called {
					t.Error("fn ran with the content of a linked file")
				}
				if _, err := Write(path, []byte("{}\n"), 0o644, mode); !errors.Is(err, ErrNotRegular) {
					t.Errorf("Write through a link = %v; want ErrNotRegular", err)
				}
				if _, err := ReadFile(context.Background(), path); !errors.Is(err, ErrNotRegular) {
					t.Errorf("ReadFile through a link = %v; want ErrNotRegular", err)
				}
				if dangling {
					if _, err := os.Lstat(shadow); !errors.Is(err, os.ErrNotExist) {
						t.Errorf("a dangling link's target was created (err %v)", err)
					}
				} else if b, err := os.ReadFile(shadow); err != nil || string(b) != secret {
					t.Errorf("the linked file now holds %q (err %v), want it untouched", b, err)
				}
				if fi, err := os.Lstat(path); err != nil || fi.Mode().Type() != os.ModeSymlink {
					t.Errorf("the link was replaced (err %v)", err)
				}
				assertNoTemp(t, shared)
			})
		}
	}
	// An input read with ReadRegular follows links (a ConfigMap volume's
	// files are links into ..data).
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "real"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadRegular(context.Background(), filepath.Join(dir, "link")); err != nil || string(b) != "x\n" {
		t.Errorf("ReadRegular through a link = %q, %v; want the file it points to", b, err)
	}
}
