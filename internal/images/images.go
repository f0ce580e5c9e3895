// Package images defines flock's container images (peer-finder,
// flock-controller and the pause image of the local cluster's node) and
// builds them with internal/imagebuild from the project's static binaries
// and a few Debian packages, with no base image and no registry.
//
// The root filesystems are pure functions of their inputs (PeerFinderRoot,
// ControllerRoot, PauseRoot); Build does the I/O: it reads the binaries,
// fetches and unpacks the packages, and writes one OCI archive per image.
package images

import (
	"bytes"
	"crypto/x509"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/flockd/flock/internal/imagebuild"
)

// UID and GID of the non-root user "flock" that peer-finder and
// flock-controller run as (distroless's "nonroot" number).
const (
	UID = 65532
	GID = 65532
	// PauseUID runs the pause image, as upstream's pause image does.
	PauseUID = 65535
)

// Path is the PATH of the images.
const Path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Applets are the busybox applets linked into /bin of peer-finder's image:
// a POSIX shell and what on-start and on-change scripts commonly use.
var Applets = []string{
	"[", "ash", "awk", "base64", "basename", "cat", "chgrp", "chmod", "chown", "cmp", "cp", "cut",
	"date", "dd", "df", "diff", "dirname", "du", "echo", "egrep", "env", "expr", "false", "fgrep",
	"find", "fold", "getopt", "grep", "gunzip", "gzip", "head", "hexdump", "hostname", "id", "ip",
	"kill", "killall", "less", "ln", "logger", "ls", "md5sum", "mkdir", "mkfifo", "mktemp", "more",
	"mv", "nc", "netstat", "nl", "nproc", "nslookup", "od", "paste", "pidof", "ping", "printf",
	"ps", "pwd", "readlink", "realpath", "rev", "rm", "rmdir", "sed", "seq", "setsid", "sh",
	"sha1sum", "sha256sum", "sha512sum", "shuf", "sleep", "sort", "stat", "strings", "sync", "tac",
	"tail", "tar", "tee", "test", "time", "timeout", "top", "touch", "tr", "true", "truncate", "tty",
	"uname", "uniq", "unlink", "unzip", "uptime", "usleep", "vi", "watch", "wc", "wget", "which",
	"whoami", "xargs", "xxd", "yes", "zcat",
}

// Debian packages the images are made of.
var (
	// PeerFinderPackages are per architecture.
	PeerFinderPackages = []string{"bash-static", "busybox-static", "libc-bin", "libc6"}
	// ControllerPackages are architecture-independent ("all").
	ControllerPackages = []string{"ca-certificates"}
)

// Package is an unpacked Debian package.
type Package struct {
	imagebuild.Deb
	Files map[string]imagebuild.File
}

// triplets are Debian's multiarch library directories by GOARCH.
var triplets = map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}

// machines are the ELF machines by GOARCH.
var machines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// Supported reports whether the images can be built for goarch.
func Supported(goarch string) bool { _, ok := triplets[goarch]; return ok }

// CheckBinary fails unless data (the whole file or its first 64 KiB) is a
// static ELF executable for goarch, as CGO_ENABLED=0 builds it: the images
// carry no C library for our binaries.
func CheckBinary(name string, data []byte, goarch string) error {
	h, err := imagebuild.ReadELFHead(data)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if want, ok := machines[goarch]; !ok || h.Machine != want {
		return fmt.Errorf("%s: ELF machine %v is not GOARCH %s", name, h.Machine, goarch)
	}
	if h.Interp || h.Dynamic {
		return fmt.Errorf("%s: dynamically linked: build with CGO_ENABLED=0", name)
	}
	return nil
}

// PeerFinderRoot returns peer-finder's root filesystem for goarch in two
// layers: the system (bash, busybox, getent with its C library, /etc, /tmp)
// and the application (/peer-finder, /usr/local/bin/peer-finder). pkgs must
// hold PeerFinderPackages for goarch.
func PeerFinderRoot(goarch string, peerFinder []byte, pkgs map[string]Package) (system, app []imagebuild.File, err error) {
	if err := CheckBinary("peer-finder", peerFinder, goarch); err != nil {
		return nil, nil, err
	}
	files, err := toolsRoot(goarch, pkgs)
	if err != nil {
		return nil, nil, fmt.Errorf("peer-finder image: %w", err)
	}
	for _, f := range files {
		system = append(system, f)
	}
	app = []imagebuild.File{
		imagebuild.Regular("/peer-finder", 0o755, peerFinder),
		imagebuild.Symlink("/usr/local/bin/peer-finder", "/peer-finder"),
	}
	return sortFiles(system), app, nil
}

// toolsRoot returns bash, busybox, getent with its C library, /etc and /tmp
// by path: peer-finder's system layer. pkgs must hold PeerFinderPackages.
func toolsRoot(goarch string, pkgs map[string]Package) (map[string]imagebuild.File, error) {
	triplet, ok := triplets[goarch]
	if !ok {
		return nil, fmt.Errorf("unsupported GOARCH %q", goarch)
	}
	take := func(pkg, from, to string) (imagebuild.File, error) {
		p, ok := pkgs[pkg]
		if !ok {
			return imagebuild.File{}, fmt.Errorf("package %s missing", pkg)
		}
		f, ok := p.Files[from]
		if !ok || !f.Mode.IsRegular() {
			return imagebuild.File{}, fmt.Errorf("%s has no file %s", pkg, from)
		}
		f.Path, f.Mode, f.UID, f.GID = to, 0o755, 0, 0
		return f, nil
	}
	files := map[string]imagebuild.File{}
	for _, c := range []struct{ pkg, from, to string }{
		{"bash-static", "/bin/bash-static", "/bin/bash"},
		{"busybox-static", "/bin/busybox", "/bin/busybox"},
		{"libc-bin", "/usr/bin/getent", "/usr/bin/getent"},
	} {
		f, err := take(c.pkg, c.from, c.to)
		if err != nil {
			return nil, err
		}
		files[f.Path] = f
	}
	for _, f := range []imagebuild.File{
		imagebuild.Symlink("/usr/bin/bash", "/bin/bash"),
		imagebuild.Symlink("/usr/bin/env", "/bin/busybox"),
	} {
		files[f.Path] = f
	}
	for _, a := range Applets {
		files["/bin/"+a] = imagebuild.Symlink("/bin/"+a, "busybox")
	}
	for _, f := range etc("/bin/sh") {
		files[f.Path] = f
	}
	libc, ok := pkgs["libc6"]
	if !ok {
		return nil, errors.New("package libc6 missing")
	}
	libDirs := []string{"/lib/" + triplet, "/usr/lib/" + triplet}
	if _, err := imagebuild.WithLibraries(files, libc.Files, libDirs, "/usr/bin/getent"); err != nil {
		return nil, fmt.Errorf("getent: %w", err)
	}
	return files, nil
}

// ControllerRoot returns flock-controller's root filesystem: the system
// layer (CA certificates from caCerts, a ca-certificates package; /etc;
// /tmp) and the application (/flock-controller).
func ControllerRoot(goarch string, controller []byte, caCerts Package) (system, app []imagebuild.File, err error) {
	if err := CheckBinary("flock-controller", controller, goarch); err != nil {
		return nil, nil, err
	}
	bundle, err := CABundle(caCerts.Files)
	if err != nil {
		return nil, nil, fmt.Errorf("flock-controller image: %w", err)
	}
	system = append(etc("/usr/sbin/nologin"), imagebuild.Regular("/etc/ssl/certs/ca-certificates.crt", 0o644, bundle))
	app = []imagebuild.File{imagebuild.Regular("/flock-controller", 0o755, controller)}
	return sortFiles(system), app, nil
}

// PauseRoot returns the pause image's root filesystem: /pause only.
func PauseRoot(goarch string, pause []byte) ([]imagebuild.File, error) {
	if err := CheckBinary("pause", pause, goarch); err != nil {
		return nil, err
	}
	return []imagebuild.File{imagebuild.Regular("/pause", 0o755, pause)}, nil
}

// CABundle concatenates the certificates a ca-certificates package ships
// under /usr/share/ca-certificates/mozilla, in name order, as the package's
// update-ca-certificates does for /etc/ssl/certs/ca-certificates.crt. Every
// file must parse as a PEM certificate.
func CABundle(files map[string]imagebuild.File) ([]byte, error) {
	var names []string
	for p, f := range files {
		if path.Dir(p) == "/usr/share/ca-certificates/mozilla" && strings.HasSuffix(p, ".crt") && f.Mode.IsRegular() {
			names = append(names, p)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("ca-certificates: no certificates under /usr/share/ca-certificates/mozilla")
	}
	slices.Sort(names)
	var buf bytes.Buffer
	for _, n := range names {
		data := files[n].Data
		if !x509.NewCertPool().AppendCertsFromPEM(data) {
			return nil, fmt.Errorf("ca-certificates: %s holds no PEM certificate", n)
		}
		buf.Write(data)
		if !bytes.HasSuffix(data, []byte("\n")) {
			buf.WriteByte('\n')
		}
	}
	return buf.Bytes(), nil
}

// etc returns the users, groups and name service files of the images, and
// the directories every process may need: an empty /tmp (1777; mount an
// emptyDir there when the root filesystem is read-only) and the homes.
func etc(shell string) []imagebuild.File {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:%s\nflock:x:%d:%d:flock:/home/flock:%s\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n", shell, UID, GID, shell)
	group := fmt.Sprintf("root:x:0:\nflock:x:%d:\nnogroup:x:65534:\n", GID)
	return []imagebuild.File{
		imagebuild.Regular("/etc/passwd", 0o644, []byte(passwd)),
		imagebuild.Regular("/etc/group", 0o644, []byte(group)),
		imagebuild.Regular("/etc/nsswitch.conf", 0o644, []byte("passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n")),
		// The kubelet and Docker mount their own; this one serves other runtimes.
		imagebuild.Regular("/etc/hosts", 0o644, []byte("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")),
		{Path: "/tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
		imagebuild.Dir("/root", 0o700),
		{Path: "/home/flock", Mode: fs.ModeDir | 0o755, UID: UID, GID: GID},
	}
}

func sortFiles(fs []imagebuild.File) []imagebuild.File {
	slices.SortFunc(fs, func(a, b imagebuild.File) int { return strings.Compare(a.Path, b.Path) })
	return fs
}
