package imagebuild

import (
	"context"
	"debug/elf"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// makeDeb builds a real .deb with dpkg-deb --build from files (host path
// inside the package -> content; a content starting with "->" is a
// symlink) and returns its path.
func makeDeb(t *testing.T, dir, name, version, arch string, files map[string]string) string {
	t.Helper()
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Skip("needs dpkg-deb")
	}
	root := t.TempDir()
	ctl := fmt.Sprintf("Package: %s\nVersion: %s\nArchitecture: %s\nMaintainer: flock tests <t@example.com>\nDescription: test package\n", name, version, arch)
	if err := os.MkdirAll(filepath.Join(root, "DEBIAN"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "DEBIAN", "control"), []byte(ctl), 0o644); err != nil {
		t.Fatal(err)
	}
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(content, "->"); ok {
			if err := os.Symlink(target, full); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, fmt.Sprintf("%s_%s_%s.deb", name, strings.ReplaceAll(version, ":", "%3a"), arch))
	if b, err := exec.Command("dpkg-deb", "--root-owner-group", "-Zgzip", "-z1", "--build", root, out).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb --build: %v\n%s", err, b)
	}
	return out
}

func TestDebFilesAndCache(t *testing.T) {
	cache := t.TempDir()
	makeDeb(t, cache, "busybox-static", "1:1.35.0-4", "arm64", map[string]string{
		"bin/busybox":    "busybox-arm64",
		"usr/share/x/sh": "->../../../bin/busybox",
	})
	// Already cached: Download must not call apt-get (an unknown package
	// name would fail there).
	debs, err := Download(context.Background(), cache, "arm64", "busybox-static")
	if err != nil {
		t.Fatal(err)
	}
	if len(debs) != 1 || debs[0].String() != "busybox-static=1:1.35.0-4" || debs[0].Arch != "arm64" {
		t.Fatalf("debs %+v", debs)
	}
	files, err := debs[0].Files(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	bb, ok := files["/bin/busybox"]
	if !ok || string(bb.Data) != "busybox-arm64" || bb.Mode != 0o755 || bb.UID != 0 {
		t.Errorf("/bin/busybox: %+v (present %v)", bb, ok)
	}
	if l := files["/usr/share/x/sh"]; l.Mode.Type() != fs.ModeSymlink || l.Link != "../../../bin/busybox" {
		t.Errorf("symlink: %+v", l)
	}
	if d := files["/usr/share"]; !d.Mode.IsDir() {
		t.Errorf("/usr/share: %+v, want a directory", d)
	}
}

// TestWithLibraries resolves the host's getent (a dynamic executable of
// libc-bin) against the host's C library: its interpreter through the
// /lib64 symlink, libc.so.6, and nothing else.
func TestWithLibraries(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the host paths below are amd64 Debian's")
	}
	host := map[string]File{}
	for _, p := range []string{"/usr/bin/getent", "/lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/libc.so.6"} {
		st, err := os.Lstat(p)
		if err != nil {
			t.Skipf("needs Debian's libc on the host: %v", err)
		}
		f := File{Path: p, Mode: st.Mode()}
		if st.Mode().Type() == fs.ModeSymlink {
			if f.Link, err = os.Readlink(p); err != nil {
				t.Fatal(err)
			}
		} else if f.Data, err = os.ReadFile(p); err != nil {
			t.Fatal(err)
		}
		host[p] = f
	}
	if host["/lib/x86_64-linux-gnu/libc.so.6"].Mode.Type() != 0 {
		t.Skip("host libc.so.6 is not a regular file")
	}
	libDirs := []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu"}

	image := map[string]File{"/usr/bin/getent": host["/usr/bin/getent"]}
	lib := map[string]File{}
	for p, f := range host {
		if p != "/usr/bin/getent" {
			lib[p] = f
		}
	}
	added, err := WithLibraries(image, lib, libDirs, "/usr/bin/getent")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range added {
		got = append(got, f.Path)
	}
	slices.Sort(got)
	want := []string{"/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"}
	if host["/lib64/ld-linux-x86-64.so.2"].Mode.Type() != fs.ModeSymlink {
		want = []string{"/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"}
	}
	if !slices.Equal(got, want) {
		t.Errorf("added %v, want %v", got, want)
	}
	if len(image) != 1+len(want) {
		t.Errorf("image has %d files, want %d", len(image), 1+len(want))
	}

	delete(lib, "/lib/x86_64-linux-gnu/libc.so.6")
	if _, err := WithLibraries(map[string]File{"/usr/bin/getent": host["/usr/bin/getent"]}, lib, libDirs, "/usr/bin/getent"); err == nil || !strings.Contains(err.Error(), "libc.so.6") {
		t.Errorf("without libc.so.6: err %v, want one naming libc.so.6", err)
	}
}

func TestReadELFHead(t *testing.T) {
	data, err := os.ReadFile("/usr/bin/getent")
	if err != nil || runtime.GOARCH != "amd64" {
		t.Skip("needs the host's amd64 /usr/bin/getent")
	}
	h, err := ReadELFHead(data[:min(len(data), 64<<10)])
	if err != nil {
		t.Fatal(err)
	}
	if h.Machine != elf.EM_X86_64 || !h.Interp || !h.Dynamic {
		t.Errorf("getent head %+v, want x86-64 with PT_INTERP and PT_DYNAMIC", h)
	}
	if _, err := ReadELFHead(data[:100]); err == nil {
		t.Error("program headers cut off: no error")
	}
	if _, err := ReadELFHead([]byte("#!/bin/sh\n")); err == nil {
		t.Error("a script: no error")
	}
}
