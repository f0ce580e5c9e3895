package images

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/flockd/flock/internal/imagebuild"
	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/internal/testing/need"
)

// archiveDir is where `make images` writes the archives: bin/images at the
// module root, or $FLOCK_IMAGES_DIR.
func archiveDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("FLOCK_IMAGES_DIR"); d != "" {
		return d
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "bin", "images")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// builtRefs are the names make images gives image name: the version of
// the repository's VERSION file, then the alias dev.
func builtRefs(t *testing.T, name string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(archiveDir(t))), "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	return []string{"ghcr.io/flockd/" + name + ":" + strings.TrimSpace(string(b)), "ghcr.io/flockd/" + name + ":dev"}
}

// builtArchives returns the archives of `make images` by name, or skips.
func builtArchives(t *testing.T) map[string]string {
	t.Helper()
	dir := archiveDir(t)
	out := map[string]string{}
	for _, name := range []string{PeerFinder, Controller, Pause} {
		p := filepath.Join(dir, name+".tar")
		if _, err := os.Stat(p); err != nil {
			t.Skipf("%s not built: run make images first", p)
		}
		out[name] = p
	}
	return out
}

var interps = map[string]string{"amd64": "/lib64/ld-linux-x86-64.so.2", "arm64": "/lib/ld-linux-aarch64.so.1"}

// TestBuiltArchives checks what `make images` wrote: both platforms, each
// binary for its platform, peer-finder's system files, the package labels.
func TestBuiltArchives(t *testing.T) {
	for name, path := range builtArchives(t) {
		imgs := readArchive(t, path, builtRefs(t, name)...)
		for _, arch := range []string{"amd64", "arm64"} {
			img := imgs["linux/"+arch]
			if img == nil {
				t.Errorf("%s: no linux/%s image (have %d platforms)", name, arch, len(imgs))
				continue
			}
			files := flatten(t, img)
			if err := CheckBinary(name, files["/"+name].Data, arch); err != nil {
				t.Errorf("%s linux/%s: %v", name, arch, err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cf.Config.Labels["org.opencontainers.image.revision"] == "" {
				t.Errorf("%s linux/%s: no revision label", name, arch)
			}
			switch name {
			case PeerFinder:
				checkPeerFinderFiles(t, files, triplets[arch], interps[arch])
				for _, p := range PeerFinderPackages {
					if !strings.Contains(cf.Config.Labels[LabelPackages], p+"=") {
						t.Errorf("peer-finder linux/%s: label %s = %q lacks %s", arch, LabelPackages, cf.Config.Labels[LabelPackages], p)
					}
				}
				if e, err := imagebuild.ReadELF(files["/bin/bash"].Data); err != nil || e.Interp != "" || e.Machine != machines[arch] {
					t.Errorf("peer-finder linux/%s: /bin/bash is not a static %s executable: %+v %v", arch, arch, e, err)
				}
			case Controller:
				checkEtc(t, name, files)
				if n := bytes.Count(files["/etc/ssl/certs/ca-certificates.crt"].Data, []byte("BEGIN CERTIFICATE")); n < 100 {
					t.Errorf("flock-controller linux/%s: %d CA certificates, want Debian's (over 100)", arch, n)
				}
			}
		}
	}
}

// writeRoot writes an image's flattened files under dir.
func writeRoot(t *testing.T, img v1.Image, dir string) {
	t.Helper()
	for p, f := range flatten(t, img) {
		full := filepath.Join(dir, p)
		var err error
		switch f.Mode.Type() {
		case fs.ModeDir:
			err = os.MkdirAll(full, 0o755)
		case fs.ModeSymlink:
			if err = os.MkdirAll(filepath.Dir(full), 0o755); err == nil {
				err = os.Symlink(f.Link, full)
			}
		default:
			if err = os.MkdirAll(filepath.Dir(full), 0o755); err == nil {
				err = os.WriteFile(full, f.Data, 0o600)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		if f.Mode.Type() != fs.ModeSymlink {
			if err := os.Chmod(full, f.Mode.Perm()|f.Mode&fs.ModeSticky); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Lchown(full, f.UID, f.GID); err != nil {
			t.Fatal(err)
		}
	}
}

// script runs in peer-finder's image as its user with the root filesystem
// read-only: bash, the tools, getent through the C library.
var script = `set -eu
echo "bash ${BASH_VERSION}"
echo "uid $(id -u):$(id -g) $(id -un)"
/peer-finder -h 2>&1 | grep -q 'Usage: peer-finder' && echo "peer-finder usage"
/usr/local/bin/peer-finder -h 2>&1 | grep -q 'Usage: peer-finder' && echo "symlink usage"
getent hosts localhost | awk '{print "getent " $1}' | sort | head -1
/bin/sh -c 'echo "sh $0"'
for a in ` + strings.Join(Applets, " ") + `; do
	busybox --list | grep -Fqx -- "$a" || { echo "missing applet $a"; exit 1; }
done
echo "applets ok"
if touch /should-not-exist 2>/dev/null; then echo "root fs writable"; exit 1; fi
echo "read-only ok"
`

// TestPeerFinderImageRuns runs the script in the amd64 peer-finder image,
// unpacked, as uid 65532 in a chroot whose root is bind-mounted read-only.
func TestPeerFinderImageRuns(t *testing.T) {
	archives := builtArchives(t)
	if runtime.GOARCH != "amd64" {
		t.Skip("the application images run on amd64 only")
	}
	need.Root(t, "(chroot, mount namespace)")
	for _, tool := range []string{"unshare", "chroot", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	img := readArchive(t, archives[PeerFinder], builtRefs(t, PeerFinder)...)["linux/amd64"]
	root := t.TempDir()
	writeRoot(t, img, root)
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
		`mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && exec chroot --userspec=65532:65532 "$1" /bin/bash -c "$2"`,
		"sh", root, script)
	cmd.Env = []string{"PATH=" + Path}
	out, err := runWithDeadline(cmd, time.Minute)
	if err != nil {
		t.Fatalf("script in the image: %v\n%s", err, out)
	}
	for _, want := range []string{"bash 5.", "uid 65532:65532 flock", "peer-finder usage", "symlink usage", "getent ::1", "sh /bin/sh", "applets ok", "read-only ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func runWithDeadline(cmd *exec.Cmd, d time.Duration) (string, error) {
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return buf.String(), err
	case <-time.After(d):
		_ = cmd.Process.Kill()
		<-done
		return buf.String(), fmt.Errorf("%s still running after %v", cmd.Path, d)
	}
}

// TestContainerdImportAndRun imports every archive into a private
// containerd (own root, state and socket under a temporary directory), checks
// `ctr images ls` names each image for linux/amd64 and linux/arm64, and runs
// peer-finder's image with runc, read-only.
func TestContainerdImportAndRun(t *testing.T) {
	archives := builtArchives(t)
	if runtime.GOARCH != "amd64" {
		t.Skip("the application images run on amd64 only")
	}
	need.Root(t, "to run containerd")
	for _, tool := range []string{"containerd", "ctr", "runc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	dir, err := os.MkdirTemp("", "flock-ctrd-")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "containerd.sock")
	config := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = %q
[ttrpc]
  address = %q
[debug]
  address = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), sock, sock+".ttrpc", filepath.Join(dir, "debug.sock"))
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	var logBuf bytes.Buffer
	ctrd := exec.Command("containerd", "--config", filepath.Join(dir, "config.toml"))
	ctrd.Stdout, ctrd.Stderr = &logBuf, &logBuf
	if err := ctrd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- ctrd.Wait() }()
	t.Cleanup(func() {
		_ = ctrd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = ctrd.Process.Kill()
			<-exited
		}
		unmountUnder(t, dir)
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("remove %s: %v", dir, err)
		}
		if t.Failed() {
			t.Logf("containerd log:\n%s", logBuf.String())
		}
	})
	ctr := func(args ...string) (string, error) {
		return runWithDeadline(exec.Command("ctr", append([]string{"-a", sock, "-n", "k8s.io"}, args...)...), 2*time.Minute)
	}
	await.Poll{Every: 100 * time.Millisecond}.Check(t, func() error {
		out, err := ctr("version")
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	}, "the private containerd to answer")
	for name, path := range archives {
		if out, err := ctr("images", "import", path); err != nil {
			t.Fatalf("ctr images import %s: %v\n%s", name, err, out)
		}
	}
	ls, err := ctr("images", "ls")
	if err != nil {
		t.Fatalf("ctr images ls: %v\n%s", err, ls)
	}
	for name := range archives {
		for _, ref := range builtRefs(t, name) {
			var line string
			for l := range strings.Lines(ls) {
				if strings.HasPrefix(l, ref+" ") {
					line = l
				}
			}
			if !strings.Contains(line, "linux/amd64") || !strings.Contains(line, "linux/arm64") {
				t.Errorf("ctr images ls: no %s for linux/amd64 and linux/arm64:\n%s", ref, ls)
			}
		}
	}

	id := "flock-imagetest-" + strconv.Itoa(os.Getpid())
	out, err := ctr("run", "--rm", "--read-only", "--cgroup", "", "--runc-root", filepath.Join(dir, "runc"),
		"ghcr.io/flockd/peer-finder:dev", id, "/bin/bash", "-c", `echo "ok $(id -u)"; getent hosts localhost >/dev/null && echo resolved`)
	if err != nil {
		t.Fatalf("ctr run peer-finder: %v\n%s", err, out)
	}
	if !strings.Contains(out, "ok 65532\n") || !strings.Contains(out, "resolved\n") {
		t.Errorf("ctr run peer-finder: output %q, want ok 65532 and resolved", out)
	}
}

// unmountUnder unmounts whatever is still mounted below dir (deepest first).
func unmountUnder(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return
	}
	var mnts []string
	for l := range strings.Lines(string(b)) {
		if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
			mnts = append(mnts, f[1])
		}
	}
	for i := len(mnts) - 1; i >= 0; i-- {
		if err := syscall.Unmount(mnts[i], syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", mnts[i], err)
		}
	}
}
