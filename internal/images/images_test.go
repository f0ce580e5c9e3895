package images

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/flockd/flock/internal/imagebuild"
)

var epoch = time.Unix(1700000000, 0).UTC()

// staticBinary builds cmd/pause (small, static) for goarch as a stand-in
// for every binary.
func staticBinary(t *testing.T, goarch string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "bin")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "github.com/flockd/flock/cmd/pause")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fakeStatic returns a minimal static ELF executable for machine: an ELF
// header and one PT_LOAD program header, then tail (what CheckBinary reads,
// without building and compressing a real binary).
func fakeStatic(t *testing.T, machine elf.Machine, tail string) []byte {
	t.Helper()
	var buf bytes.Buffer
	h := elf.Header64{
		Ident:   [elf.EI_NIDENT]byte{0x7f, 'E', 'L', 'F', byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)},
		Type:    uint16(elf.ET_EXEC),
		Machine: uint16(machine),
		Version: uint32(elf.EV_CURRENT),
		Phoff:   64, Ehsize: 64, Phentsize: 56, Phnum: 1,
	}
	p := elf.Prog64{Type: uint32(elf.PT_LOAD), Flags: uint32(elf.PF_R | elf.PF_X)}
	if err := binary.Write(&buf, binary.LittleEndian, h); err != nil {
		t.Fatal(err)
	}
	if err := binary.Write(&buf, binary.LittleEndian, p); err != nil {
		t.Fatal(err)
	}
	buf.WriteString(tail)
	return buf.Bytes()
}

func TestCheckBinary(t *testing.T) {
	if err := CheckBinary("x", fakeStatic(t, elf.EM_AARCH64, "x"), "arm64"); err != nil {
		t.Errorf("minimal static arm64 ELF: %v", err)
	}
	static := staticBinary(t, "amd64")
	if err := CheckBinary("x", static, "amd64"); err != nil {
		t.Errorf("static amd64 binary: %v", err)
	}
	if err := CheckBinary("x", static, "arm64"); err == nil || !strings.Contains(err.Error(), "machine") {
		t.Errorf("amd64 binary as arm64: err %v, want a machine mismatch", err)
	}
	if err := CheckBinary("x", []byte("#!/bin/sh\n"), "amd64"); err == nil {
		t.Error("a script: no error")
	}
	dyn, err := os.ReadFile("/usr/bin/getent")
	if err != nil || runtime.GOARCH != "amd64" {
		t.Skip("needs the host's dynamic /usr/bin/getent (amd64)")
	}
	if err := CheckBinary("x", dyn, "amd64"); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("dynamic binary: err %v, want CGO_ENABLED=0 advice", err)
	}
}

func TestCABundle(t *testing.T) {
	pem, err := os.ReadFile("testdata/cert.pem")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]imagebuild.File{
		"/usr/share/ca-certificates/mozilla/B.crt": {Path: "/usr/share/ca-certificates/mozilla/B.crt", Data: pem},
		"/usr/share/ca-certificates/mozilla/A.crt": {Path: "/usr/share/ca-certificates/mozilla/A.crt", Data: []byte(strings.TrimSuffix(string(pem), "\n"))},
		"/usr/share/doc/ca-certificates/README":    {Path: "/usr/share/doc/ca-certificates/README", Data: []byte("not a cert")},
	}
	b, err := CABundle(files)
	if err != nil {
		t.Fatal(err)
	}
	if want := string(pem) + string(pem); string(b) != want {
		t.Errorf("bundle:\n%s\nwant both certificates, each ending in a newline", b)
	}
	files["/usr/share/ca-certificates/mozilla/C.crt"] = imagebuild.File{Path: "/usr/share/ca-certificates/mozilla/C.crt", Data: []byte("garbage")}
	if _, err := CABundle(files); err == nil || !strings.Contains(err.Error(), "C.crt") {
		t.Errorf("garbage certificate: err %v, want one naming C.crt", err)
	}
}

// fakeDebs writes, into cache/<arch>, real .deb files named like Debian's
// whose content is the host's getent and C library (amd64) and stand-ins
// for bash and busybox, and a ca-certificates package into cache/all.
func fakeDebs(t *testing.T, cache string) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skip("uses the host's amd64 getent and C library")
	}
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Skip("needs dpkg-deb")
	}
	host := func(p string) string {
		if st, err := os.Lstat(p); err == nil && st.Mode().Type() == fs.ModeSymlink {
			l, _ := os.Readlink(p)
			return "->" + l
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Skipf("needs Debian's C library on the host: %v", err)
		}
		return string(b)
	}
	pem, err := os.ReadFile("testdata/cert.pem")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		name, version, arch string
		files               map[string]string
	}{
		{"bash-static", "5.2.15-2+b13", "amd64", map[string]string{"bin/bash-static": "bash"}},
		{"busybox-static", "1:1.35.0-4+deb12u1+b1", "amd64", map[string]string{"bin/busybox": "busybox"}},
		{"libc-bin", "2.36-9+deb12u14", "amd64", map[string]string{"usr/bin/getent": host("/usr/bin/getent"), "usr/bin/ldd": "ldd"}},
		{"libc6", "2.36-9+deb12u14", "amd64", map[string]string{
			"lib64/ld-linux-x86-64.so.2":                host("/lib64/ld-linux-x86-64.so.2"),
			"lib/x86_64-linux-gnu/ld-linux-x86-64.so.2": host("/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"),
			"lib/x86_64-linux-gnu/libc.so.6":            host("/lib/x86_64-linux-gnu/libc.so.6"),
			"lib/x86_64-linux-gnu/libm.so.6":            "libm",
		}},
		{"ca-certificates", "20250419~deb12u2", "all", map[string]string{"usr/share/ca-certificates/mozilla/Test.crt": string(pem)}},
	} {
		fakeDeb(t, cache, p.name, p.version, p.arch, p.files)
	}
}

// fakeDeb writes a real .deb named like Debian's into cache/arch, holding
// files (relative path: content, or "->target" for a symlink).
func fakeDeb(t *testing.T, cache, name, version, arch string, files map[string]string) {
	t.Helper()
	dir := filepath.Join(cache, arch)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	ctl := fmt.Sprintf("Package: %s\nVersion: %s\nArchitecture: %s\nMaintainer: t <t@example.com>\nDescription: test\n", name, version, arch)
	write(t, filepath.Join(root, "DEBIAN", "control"), ctl)
	for path, content := range files {
		write(t, filepath.Join(root, path), content)
	}
	out := filepath.Join(dir, fmt.Sprintf("%s_%s_%s.deb", name, strings.ReplaceAll(version, ":", "%3a"), arch))
	if b, err := exec.Command("dpkg-deb", "--root-owner-group", "-Zgzip", "-z1", "--build", root, out).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb --build: %v\n%s", err, b)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if target, ok := strings.CutPrefix(content, "->"); ok {
		if err := os.Symlink(target, path); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestBuild runs Build on a prepared package cache (no download) and reads
// the archives back with go-containerregistry.
func TestBuild(t *testing.T) {
	cache := t.TempDir()
	fakeDebs(t, cache)
	bin := t.TempDir()
	static := map[string][]byte{}
	for _, name := range []string{PeerFinder, Controller, Pause} {
		static[name] = fakeStatic(t, elf.EM_X86_64, name)
		write(t, filepath.Join(bin, "amd64", name), "")
		if err := os.WriteFile(filepath.Join(bin, "amd64", name), static[name], 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out := t.TempDir()
	archives, err := Build(context.Background(), Options{
		Repo: "ghcr.io/flockd", Tag: "v1.2.3", Aliases: []string{"dev"}, Arches: []string{"amd64"},
		BinDir: bin, OutDir: out, DebCache: cache, Created: epoch, Revision: "0123abc",
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(archives) != 3 {
		t.Fatalf("archives %v, want 3", archives)
	}

	wantPkgs := map[string]string{
		PeerFinder: "bash-static=5.2.15-2+b13 busybox-static=1:1.35.0-4+deb12u1+b1 libc-bin=2.36-9+deb12u14 libc6=2.36-9+deb12u14",
		Controller: "ca-certificates=20250419~deb12u2",
		Pause:      "",
	}
	for _, a := range archives {
		name := strings.TrimSuffix(filepath.Base(a.Path), ".tar")
		if a.Ref != "ghcr.io/flockd/"+name+":v1.2.3" || !slices.Equal(a.Aliases, []string{"ghcr.io/flockd/" + name + ":dev"}) {
			t.Errorf("%s: ref %s, aliases %q", a.Path, a.Ref, a.Aliases)
		}
		imgs := readArchive(t, a.Path, "ghcr.io/flockd/"+name+":v1.2.3", "ghcr.io/flockd/"+name+":dev")
		if len(imgs) != 1 {
			t.Fatalf("%s: %d platforms, want 1 (linux/amd64)", name, len(imgs))
		}
		img := imgs["linux/amd64"]
		if img == nil {
			t.Fatalf("%s: no linux/amd64 image: %v", name, imgs)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		c := cf.Config
		wantUser := "65532:65532"
		if name == Pause {
			wantUser = "65535:65535"
		}
		if !reflect.DeepEqual(c.Entrypoint, []string{"/" + name}) || c.User != wantUser || c.WorkingDir != "/" {
			t.Errorf("%s: entrypoint %v user %q workdir %q", name, c.Entrypoint, c.User, c.WorkingDir)
		}
		for k, v := range map[string]string{
			"org.opencontainers.image.source":   Source,
			"org.opencontainers.image.revision": "0123abc",
			"org.opencontainers.image.version":  "v1.2.3",
			"org.opencontainers.image.created":  "2023-11-14T22:13:20Z",
			LabelPackages:                       wantPkgs[name],
		} {
			if c.Labels[k] != v {
				t.Errorf("%s: label %s = %q, want %q", name, k, c.Labels[k], v)
			}
		}
		files := flatten(t, img)
		if f := files["/"+name]; f.Mode != 0o755 || !bytes.Equal(f.Data, static[name]) {
			t.Errorf("%s: /%s mode %v size %d", name, name, f.Mode, len(f.Data))
		}
		switch name {
		case PeerFinder:
			checkPeerFinderFiles(t, files, "x86_64-linux-gnu", "/lib64/ld-linux-x86-64.so.2")
			if _, ok := files["/lib/x86_64-linux-gnu/libm.so.6"]; ok {
				t.Error("libm.so.6 is in the image: getent does not need it")
			}
			if _, ok := files["/usr/bin/ldd"]; ok {
				t.Error("ldd is in the image")
			}
		case Controller:
			if f := files["/etc/ssl/certs/ca-certificates.crt"]; !strings.Contains(string(f.Data), "BEGIN CERTIFICATE") {
				t.Errorf("flock-controller: CA bundle %q", f.Data)
			}
			checkEtc(t, name, files)
		case Pause:
			if len(files) != 1 {
				t.Errorf("pause: files %v, want /pause only", keys(files))
			}
		}
	}

	// Re-running with the same inputs leaves every archive byte-identical.
	before := map[string][]byte{}
	for _, a := range archives {
		before[a.Path], _ = os.ReadFile(a.Path)
	}
	if _, err := Build(context.Background(), Options{
		Repo: "ghcr.io/flockd", Tag: "v1.2.3", Aliases: []string{"dev"}, Arches: []string{"amd64"},
		BinDir: bin, OutDir: out, DebCache: cache, Created: epoch, Revision: "0123abc",
		Logger: slog.New(slog.DiscardHandler),
	}); err != nil {
		t.Fatal(err)
	}
	for p, b := range before {
		if now, _ := os.ReadFile(p); string(now) != string(b) {
			t.Errorf("%s changed between two builds of the same inputs", p)
		}
	}
}

func TestBuildRejectsDynamicBinary(t *testing.T) {
	cache := t.TempDir()
	fakeDebs(t, cache)
	bin := t.TempDir()
	static := fakeStatic(t, elf.EM_X86_64, "")
	dyn, err := os.ReadFile("/usr/bin/getent")
	if err != nil {
		t.Skip("needs /usr/bin/getent")
	}
	for name, b := range map[string][]byte{PeerFinder: dyn, Controller: static, Pause: static} {
		write(t, filepath.Join(bin, "amd64", name), "")
		if err := os.WriteFile(filepath.Join(bin, "amd64", name), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	_, err = Build(context.Background(), Options{
		Repo: "r", Tag: "t", Arches: []string{"amd64"}, BinDir: bin, OutDir: t.TempDir(), DebCache: cache,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err == nil || !strings.Contains(err.Error(), "peer-finder") || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Fatalf("dynamic peer-finder: err %v, want one naming peer-finder and CGO_ENABLED=0", err)
	}
}

// checkPeerFinderFiles checks the system files of peer-finder's image.
func checkPeerFinderFiles(t *testing.T, files map[string]imagebuild.File, triplet, interp string) {
	t.Helper()
	for _, p := range []string{"/bin/bash", "/bin/busybox", "/usr/bin/getent", "/lib/" + triplet + "/libc.so.6"} {
		if f, ok := files[p]; !ok || !f.Mode.IsRegular() || len(f.Data) == 0 {
			t.Errorf("peer-finder: %s missing or not a regular file: %+v", p, f.Mode)
		}
	}
	if _, ok := files[interp]; !ok {
		t.Errorf("peer-finder: interpreter %s missing", interp)
	}
	for _, a := range append([]string{"sh", "awk", "sed", "grep", "nslookup", "["}, Applets...) {
		if f := files["/bin/"+a]; f.Mode.Type() != fs.ModeSymlink || f.Link != "busybox" {
			t.Errorf("peer-finder: /bin/%s is not a symlink to busybox: %+v", a, f)
		}
	}
	if f := files["/usr/local/bin/peer-finder"]; f.Link != "/peer-finder" {
		t.Errorf("peer-finder: /usr/local/bin/peer-finder -> %q, want /peer-finder", f.Link)
	}
	if f := files["/usr/bin/env"]; f.Link != "/bin/busybox" {
		t.Errorf("peer-finder: /usr/bin/env -> %q", f.Link)
	}
	if got := string(files["/etc/nsswitch.conf"].Data); !strings.Contains(got, "hosts: files dns\n") {
		t.Errorf("peer-finder: nsswitch.conf %q lacks hosts: files dns", got)
	}
	checkEtc(t, PeerFinder, files)
}

func checkEtc(t *testing.T, name string, files map[string]imagebuild.File) {
	t.Helper()
	if got := string(files["/etc/passwd"].Data); !strings.Contains(got, "\nflock:x:65532:65532:") || !strings.HasPrefix(got, "root:x:0:0:") {
		t.Errorf("%s: /etc/passwd %q", name, got)
	}
	if got := string(files["/etc/group"].Data); !strings.Contains(got, "\nflock:x:65532:") {
		t.Errorf("%s: /etc/group %q", name, got)
	}
	if f := files["/tmp"]; f.Mode != fs.ModeDir|fs.ModeSticky|0o777 {
		t.Errorf("%s: /tmp mode %v, want drwxrwxrwt", name, f.Mode)
	}
}

// readArchive untars an OCI archive, checks that index.json has one entry
// per ref, in order, naming it (both annotations), all of one image index,
// and returns that index's images by platform.
func readArchive(t *testing.T, path string, refs ...string) map[string]v1.Image {
	t.Helper()
	lp, top, err := imagebuild.OpenArchive(path, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) != len(refs) {
		t.Fatalf("%s: index.json has %d entries, want %d (%q)", path, len(top.Manifests), len(refs), refs)
	}
	for i, ref := range refs {
		for _, k := range []string{imagebuild.AnnotationContainerdName, imagebuild.AnnotationRefName} {
			if got := top.Manifests[i].Annotations[k]; got != ref {
				t.Errorf("%s: index.json entry %d %s = %q, want %q", path, i, k, got, ref)
			}
		}
		if top.Manifests[i].Digest != top.Manifests[0].Digest {
			t.Errorf("%s: index.json entry %d is %s, entry 0 is %s: want one image", path, i, top.Manifests[i].Digest, top.Manifests[0].Digest)
		}
	}
	ii, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	idx, err := ii.ImageIndex(top.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]v1.Image{}
	for _, d := range im.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		out[d.Platform.String()] = img
	}
	return out
}

// flatten flattens an image's layers into path -> file (a later layer's
// entry replaces an earlier one; these images have no whiteouts). Layers are
// decompressed by gzip(1) when present: the race detector slows Go's
// inflate to about 15 MB/s, and peer-finder's layers are 100 MB.
func flatten(t *testing.T, img v1.Image) map[string]imagebuild.File {
	t.Helper()
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]imagebuild.File{}
	for _, l := range ls {
		rc, wait := uncompressed(t, l)
		readLayer(t, rc, files)
		_ = rc.Close()
		wait()
	}
	return files
}

func uncompressed(t *testing.T, l v1.Layer) (io.ReadCloser, func()) {
	t.Helper()
	if _, err := exec.LookPath("gzip"); err != nil {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		return rc, func() {}
	}
	c, err := l.Compressed()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("gzip", "-dc")
	cmd.Stdin = c
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return out, func() {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("gzip -dc: %v", err)
		}
		_ = c.Close()
	}
}

func readLayer(t *testing.T, r io.Reader, files map[string]imagebuild.File) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := "/" + strings.TrimSuffix(h.Name, "/")
		f := imagebuild.File{Path: p, Mode: fs.FileMode(h.Mode).Perm(), UID: h.Uid, GID: h.Gid, Link: h.Linkname}
		if h.Mode&0o1000 != 0 {
			f.Mode |= fs.ModeSticky
		}
		switch h.Typeflag {
		case tar.TypeDir:
			f.Mode |= fs.ModeDir
		case tar.TypeSymlink:
			f.Mode |= fs.ModeSymlink
		case tar.TypeReg:
			if f.Data, err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
		files[p] = f
	}
}

func keys(m map[string]imagebuild.File) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
