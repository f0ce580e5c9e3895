package atomicfile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestDiskFull fills a real small tmpfs (mounted in a private mount
// namespace) and checks that a write that cannot complete leaves the previous
// content whole, in every mode, and that the next write succeeds once space
// is freed.
func TestDiskFull(t *testing.T) { runInMountNS(t, "TestInsideDiskFull") }

// TestInsideDiskFull is the body of TestDiskFull; it only runs in the
// re-executed binary.
func TestInsideDiskFull(t *testing.T) {
	if os.Getenv(inMountNS) == "" {
		t.Skip("runs only inside TestDiskFull's mount namespace")
	}
	type tc struct {
		name string
		mode Mode
		bind bool // the target is a bind mount of a file on the full tmpfs, like the kubelet's /etc/hosts
	}
	for _, c := range []tc{{"in-place", InPlace, false}, {"replace", Replace, false}, {"auto", Auto, false}, {"auto-bind-mounted", Auto, true}} {
		t.Run(c.name, func(t *testing.T) {
			mode := c.mode
			dir := t.TempDir()
			// 8 pages: the target, the filler and nothing else fit.
			if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=32k,nr_inodes=16"); err != nil {
				t.Skipf("mount tmpfs: %v", err)
			}
			defer syscall.Unmount(dir, syscall.MNT_DETACH)
			path := filepath.Join(dir, "hosts")
			// The old content: a managed block followed by foreign lines,
			// just under one page so growing needs a new page.
			old := "127.0.0.1\tlocalhost\n# BEGIN flock\n" + strings.Repeat("10.0.0.1\tweb-0.web.default.svc.cluster.local\n", 85) + "# END flock\n10.9.9.9\tforeign\n"
			if len(old) > 4096 {
				t.Fatalf("old content is %d bytes, want one page", len(old))
			}
			if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
				t.Fatal(err)
			}
			filler := fill(t, dir)
			if c.bind {
				target := filepath.Join(t.TempDir(), "hosts")
				if err := os.WriteFile(target, nil, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := syscall.Mount(path, target, "", syscall.MS_BIND, ""); err != nil {
					t.Skipf("bind mount: %v", err)
				}
				defer syscall.Unmount(target, 0)
				defer assertNoTemp(t, filepath.Dir(target))
				path = target
			}
			// New content spans two pages, so it needs space the file system
			// no longer has.
			grown := "127.0.0.1\tlocalhost\n# BEGIN flock\n" + strings.Repeat("10.0.0.2\tweb-1.web.default.svc.cluster.local\n", 150) + "# END flock\n10.9.9.9\tforeign\n"
			_, err := Write(path, []byte(grown), 0o644, mode)
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("Write on a full file system: err = %v, want ENOSPC", err)
			}
			got, rerr := os.ReadFile(path)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if string(got) != old {
				t.Fatalf("after ENOSPC the file holds %d bytes (ends %q), want the previous %d bytes whole", len(got), tail(got), len(old))
			}
			assertNoTemp(t, dir)

			// Space freed: the same write now succeeds.
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
			if _, err := Write(path, []byte(grown), 0o644, mode); err != nil {
				t.Fatalf("Write after space was freed: %v", err)
			}
			assertFile(t, path, grown)
			assertNoTemp(t, dir)
		})
	}
}

// fill writes a file in dir until the file system is full and returns its
// path.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	page := bytes.Repeat([]byte{'x'}, 4096)
	for i := 0; ; i++ {
		if _, err := f.Write(page); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill: %v", err)
			}
			return path
		}
		if i > 1<<16 {
			t.Fatal("fill: the file system never got full")
		}
	}
}

func tail(b []byte) []byte {
	if len(b) > 40 {
		return b[len(b)-40:]
	}
	return b
}
