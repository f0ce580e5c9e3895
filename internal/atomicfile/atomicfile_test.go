package atomicfile

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/flockd/flock/internal/testing/need"
)

// inMountNS is set in the re-executed test binary that runs inside a private
// mount namespace.
const inMountNS = "FLOCK_ATOMICFILE_MOUNTNS"

func TestWriteReplaceAndSkip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hosts")

	res, err := Write(path, []byte("a\nb\n"), 0o640, Auto)
	if err != nil || res != Replaced {
		t.Fatalf("first Write = %v, %v; want replaced, nil", res, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("mode = %v, want 0640", fi.Mode().Perm())
	}
	ino := inode(t, path)

	res, err = Write(path, []byte("a\nb\n"), 0o600, Auto)
	if err != nil || res != Unchanged {
		t.Fatalf("same bytes: Write = %v, %v; want unchanged, nil", res, err)
	}
	if got := inode(t, path); got != ino {
		t.Errorf("unchanged write replaced the file (inode %d -> %d)", ino, got)
	}

	if err := os.Chmod(path, 0o604); err != nil {
		t.Fatal(err)
	}
	res, err = Write(path, []byte("c\n"), 0o600, Auto)
	if err != nil || res != Replaced {
		t.Fatalf("new bytes: Write = %v, %v; want replaced, nil", res, err)
	}
	if got := inode(t, path); got == ino {
		t.Errorf("replace kept the inode; want a renamed temporary file")
	}
	assertFile(t, path, "c\n")
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o604 {
		t.Errorf("mode after replace = %v, want the existing 0604 kept", fi.Mode().Perm())
	}
	assertNoTemp(t, dir)
}

func TestInPlaceShrinkAndGrow(t *testing.T) {
	for _, tc := range []struct{ name, old, new string }{
		{"shrink", "1.1.1.1\tlong-name-0\n2.2.2.2\tlong-name-1\n", "3.3.3.3\tx\n"},
		{"grow", "x\n", "1.1.1.1\ta\n2.2.2.2\tb\n"},
		{"empty", "abc\n", ""},
		{"create", "", "fresh\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f")
			if tc.old != "" {
				if err := os.WriteFile(path, []byte(tc.old), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var ino uint64
			if tc.old != "" {
				ino = inode(t, path)
			}
			res, err := Write(path, []byte(tc.new), 0o644, InPlace)
			if err != nil || res != Rewritten {
				t.Fatalf("Write = %v, %v; want rewritten, nil", res, err)
			}
			assertFile(t, path, tc.new)
			if tc.old != "" && inode(t, path) != ino {
				t.Errorf("in-place rewrite changed the inode")
			}
		})
	}
}

func TestReplaceOnlyFailsOnDirectoryTarget(t *testing.T) {
	// A directory at the target makes rename fail; Replace must report it
	// and leave no temporary file behind.
	dir := t.TempDir()
	path := filepath.Join(dir, "target")
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(path, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(path, []byte("data"), 0o644, Replace); err == nil {
		t.Fatal("Write over a non-empty directory succeeded; want an error")
	}
	assertNoTemp(t, dir)
}

func TestParseMode(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Mode
		err  bool
	}{
		{"", Auto, false}, {"auto", Auto, false}, {"replace", Replace, false},
		{"in-place", InPlace, false}, {"inplace", InPlace, false}, {"sideways", Auto, true},
	} {
		got, err := ParseMode(tc.in)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("ParseMode(%q) = %v, %v; want %v, err %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// TestBindMountedTarget runs the bind-mount cases in a re-executed test
// binary inside a new private mount namespace, so that mounts never leak to
// the host.
func TestBindMountedTarget(t *testing.T) { runInMountNS(t, "TestInsideMountNS") }

// runInMountNS re-executes the test binary to run the test named inner inside
// a new private mount namespace. It needs root and says so when it skips.
func runInMountNS(t *testing.T, inner string) {
	t.Helper()
	if os.Getenv(inMountNS) != "" {
		t.Skip("already inside the mount namespace")
	}
	need.Root(t, "to create a mount namespace and mount")
	cmd := exec.Command(os.Args[0], "-test.run=^"+inner+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), inMountNS+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && strings.Contains(string(out), "--- FAIL") {
			t.Fatalf("inside mount namespace:\n%s", out)
		}
		if bytes.Contains(out, []byte("--- SKIP")) || !errors.As(err, &ee) {
			t.Skipf("cannot create a mount namespace: %v\n%s", err, out)
		}
		t.Fatalf("inside mount namespace: %v\n%s", err, out)
	}
	if bytes.Contains(out, []byte("--- SKIP: "+inner)) {
		t.Skipf("inside mount namespace:\n%s", out)
	}
	if !bytes.Contains(out, []byte("--- PASS: "+inner)) {
		t.Fatalf("helper did not run the test:\n%s", out)
	}
	t.Logf("inside mount namespace:\n%s", out)
}

// TestInsideMountNS is the body of TestBindMountedTarget; it only runs in the
// re-executed binary.
func TestInsideMountNS(t *testing.T) {
	if os.Getenv(inMountNS) == "" {
		t.Skip("runs only inside TestBindMountedTarget's mount namespace")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "node-hosts") // like the kubelet's etc-hosts file
	target := filepath.Join(dir, "hosts")   // like /etc/hosts in the container
	old := "127.0.0.1\tlocalhost\n10.0.0.1\tvery-long-name-that-will-go-away\n10.0.0.2\tanother-long-name\n"
	if err := os.WriteFile(src, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(target, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(src, target, "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("bind mount not permitted: %v", err)
	}
	defer syscall.Unmount(target, 0)

	// The plain replace must fail with EBUSY: that is the case we handle.
	if _, err := Write(target, []byte("x\n"), 0o644, Replace); !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("Replace over a bind mount: err = %v, want EBUSY", err)
	}
	assertNoTemp(t, dir)

	// Auto falls back to rewriting in place; shorter content leaves no tail.
	short := "127.0.0.1\tlocalhost\n10.0.0.9\tps-0\n"
	res, err := Write(target, []byte(short), 0o644, Auto)
	if err != nil || res != Rewritten {
		t.Fatalf("Auto over a bind mount = %v, %v; want rewritten, nil", res, err)
	}
	assertFile(t, target, short)
	assertFile(t, src, short) // the bind source is the same inode
	assertNoTemp(t, dir)

	// Longer content, then unchanged.
	long := short + "10.0.0.10\tworker-0\n10.0.0.11\tworker-1\n"
	if res, err := Write(target, []byte(long), 0o644, Auto); err != nil || res != Rewritten {
		t.Fatalf("Auto grow = %v, %v", res, err)
	}
	assertFile(t, target, long)
	if res, err := Write(target, []byte(long), 0o644, Auto); err != nil || res != Unchanged {
		t.Fatalf("Auto same bytes = %v, %v; want unchanged", res, err)
	}
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

func assertFile(t *testing.T, path, want string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s = %q, want %q", path, got, want)
	}
}

// assertNoTemp fails when dir holds a leftover temporary file.
func assertNoTemp(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), "tmp") {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}
}
