package atomicfile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/flockd/flock/internal/testing/need"
)

// TestReplaceKeepsModeBits: a replaced file keeps every mode bit of the
// file it replaces, setuid, setgid and sticky included (issue 36 #18: 2640
// became 640).
func TestReplaceKeepsModeBits(t *testing.T) {
	for _, mode := range []os.FileMode{0o604, 0o640 | os.ModeSetgid, 0o750 | os.ModeSetuid, 0o644 | os.ModeSticky} {
		for _, wm := range []Mode{Auto, Replace, InPlace} {
			t.Run(mode.String()+"/"+wm.String(), func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "hosts")
				if err := os.WriteFile(path, []byte("old\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(path, mode); err != nil {
					t.Fatal(err)
				}
				if fi, _ := os.Stat(path); fi.Mode()&modeBits != mode {
					need.Unavailable(t, "root", fmt.Sprintf("the file system keeps %v of %v", fi.Mode()&modeBits, mode))
				}
				if _, err := Write(path, []byte("new\n"), 0o644, wm); err != nil {
					t.Fatal(err)
				}
				assertFile(t, path, "new\n")
				if fi, _ := os.Stat(path); fi.Mode()&modeBits != mode {
					t.Errorf("mode after the write = %v, want %v kept", fi.Mode()&modeBits, mode)
				}
			})
		}
	}
}

// TestNewFileHonoursUmask: a new file gets perm without the umask's bits,
// in every mode (issue 36 #18: 0644 under umask 077).
func TestNewFileHonoursUmask(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	for _, wm := range []Mode{Auto, Replace, InPlace} {
		t.Run(wm.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "hosts")
			if _, err := Update(context.Background(), path, 0o644, wm, func([]byte) ([]byte, error) { return []byte("x\n"), nil }); err != nil {
				t.Fatal(err)
			}
			if fi, _ := os.Stat(path); fi.Mode()&modeBits != 0o600 {
				t.Errorf("new file's mode under umask 077 = %v, want 0600", fi.Mode()&modeBits)
			}
		})
	}
}

// TestStaleCleanupRemovesOnlyOurTemporaryFiles: the cleanup of temporary
// files a killed writer stranded removes only files named as this package
// names its temporary files and owned by this process's user: another
// program's .hosts.tmp123 and another user's file stay (issue 36 #18).
func TestStaleCleanupRemovesOnlyOurTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hosts")
	stale := []string{".hosts.flock-tmp123", ".hosts.flock-tmp4294967295"}
	keep := []string{"hosts", ".hosts.tmp123", ".hosts.flock-tmp", ".hosts.flock-tmpx1", ".other.flock-tmp123", "hosts.flock-tmp123"}
	for _, n := range append(slices.Clone(stale), keep...) {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if os.Geteuid() == 0 {
		theirs := ".hosts.flock-tmp777"
		if err := os.WriteFile(filepath.Join(dir, theirs), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(filepath.Join(dir, theirs), 65534, 65534); err != nil {
			t.Fatal(err)
		}
		keep = append(keep, theirs)
	} else {
		t.Log("not root: another user's file is not tried")
	}
	for _, mode := range []Mode{InPlace, Replace} {
		if _, err := Update(context.Background(), path, 0o644, mode, func([]byte) ([]byte, error) { return []byte("x\n"), nil }); err != nil {
			t.Fatal(err)
		}
	}
	entries, _ := os.ReadDir(dir)
	var have []string
	for _, e := range entries {
		have = append(have, e.Name())
	}
	slices.Sort(have)
	slices.Sort(keep)
	if !slices.Equal(have, keep) {
		t.Errorf("directory holds %v, want %v", have, keep)
	}
}
