package atomicfile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flockd/flock/internal/testing/need"
	"golang.org/x/sys/unix"
)

// TestHardLinkedTargetIsRefused: a target with another name (a hard link)
// is refused in every mode: a replace split the names (the other one kept
// the old content, silently), and a rewrite in place would write through a
// name that someone else may have planted, as a symbolic link would (issue
// 36 #20).
func TestHardLinkedTargetIsRefused(t *testing.T) {
	for _, mode := range []Mode{Auto, Replace, InPlace} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			path, other := filepath.Join(dir, "hosts"), filepath.Join(t.TempDir(), "other")
			if err := os.WriteFile(path, []byte("old\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Link(path, other); err != nil {
				need.Unavailable(t, "root", fmt.Sprintf("hard link: %v", err))
			}
			ino := inode(t, path)
			_, err := Update(context.Background(), path, 0o644, mode, func([]byte) ([]byte, error) { return []byte("new\n"), nil })
			if !errors.Is(err, ErrHardLinked) || !strings.Contains(err.Error(), path) {
				t.Errorf("Update of a file with 2 links = %v; want an error wrapping ErrHardLinked naming %s", err, path)
			}
			assertFile(t, path, "old\n")
			assertFile(t, other, "old\n")
			if inode(t, path) != ino {
				t.Error("the linked file was replaced: its names now differ")
			}
			assertNoTemp(t, dir)
		})
	}
}

// TestReplaceKeepsExtendedAttributes: a replace copies the extended
// attributes of the file it replaces to the new file (user.*, and what else
// the process may set), which a new inode would otherwise lack (issue 36
// #20).
func TestReplaceKeepsExtendedAttributes(t *testing.T) {
	for _, mode := range []Mode{Auto, Replace} {
		t.Run(mode.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "hosts")
			if err := os.WriteFile(path, []byte("old\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := unix.Setxattr(path, "user.flock.test", []byte("kept"), 0); err != nil {
				need.Unavailable(t, "root", fmt.Sprintf("the file system takes no user.* attribute: %v", err))
			}
			ino := inode(t, path)
			if res, err := Write(path, []byte("new\n"), 0o644, mode); err != nil || res != Replaced {
				t.Fatalf("Write = %v, %v; want replaced", res, err)
			}
			if inode(t, path) == ino {
				t.Fatal("not replaced: the test proves nothing")
			}
			buf := make([]byte, 64)
			n, err := unix.Getxattr(path, "user.flock.test", buf)
			if err != nil || string(buf[:n]) != "kept" {
				t.Errorf("user.flock.test after the replace = %q, %v; want \"kept\"", buf[:max(n, 0)], err)
			}
		})
	}
}
