package images

import (
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/flockd/flock/internal/imagebuild"
	"github.com/flockd/flock/internal/testing/need"
)

// fakeRedisDebs writes the Redis image's packages that fakeDebs does not:
// redis-tools with the host's getent (dynamic, needs only the C library)
// as redis-check-rdb and redis-cli, redis-server's link, and the other
// libraries as packages holding only a copyright file.
func fakeRedisDebs(t *testing.T, cache string) {
	t.Helper()
	getent, err := os.ReadFile("/usr/bin/getent")
	if err != nil {
		t.Skipf("needs the host's getent: %v", err)
	}
	fakeDeb(t, cache, "redis-tools", "5:7.0.15-1~deb12u10", "amd64", map[string]string{
		"usr/bin/redis-check-rdb": string(getent), "usr/bin/redis-cli": string(getent), "usr/bin/redis-benchmark": "not taken",
	})
	fakeDeb(t, cache, "redis-server", "5:7.0.15-1~deb12u10", "amd64", map[string]string{
		"usr/bin/redis-server": "->redis-check-rdb", "etc/redis/redis.conf": "not taken",
	})
	for _, p := range RedisPackages {
		switch p {
		case "busybox-static", "libc6", "redis-server", "redis-tools":
			continue
		}
		fakeDeb(t, cache, p, "1.0", "amd64", map[string]string{"usr/share/doc/" + p + "/copyright": p})
	}
}

// redisPackages are in-memory Redis packages for RedisRoot: busybox, the C
// library, and the host's getent (dynamic, needs libc) as redis-tools'
// binaries.
func redisPackages(t *testing.T) map[string]Package {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skip("uses the host's amd64 getent")
	}
	getent, err := os.ReadFile("/usr/bin/getent")
	if err != nil {
		t.Skipf("needs the host's getent: %v", err)
	}
	libc, err := os.ReadFile("/lib/x86_64-linux-gnu/libc.so.6")
	if err != nil {
		t.Skipf("needs the host's C library: %v", err)
	}
	ld, err := os.ReadFile("/lib64/ld-linux-x86-64.so.2")
	if err != nil {
		t.Skipf("needs the host's dynamic loader: %v", err)
	}
	pkg := func(files ...imagebuild.File) Package {
		p := Package{Files: map[string]imagebuild.File{}}
		for _, f := range files {
			p.Files[f.Path] = f
		}
		return p
	}
	return map[string]Package{
		"busybox-static": pkg(imagebuild.Regular("/bin/busybox", 0o755, []byte("busybox"))),
		"libc6": pkg(
			imagebuild.Regular("/lib64/ld-linux-x86-64.so.2", 0o755, ld),
			imagebuild.Regular("/lib/x86_64-linux-gnu/libc.so.6", 0o755, libc),
			imagebuild.Regular("/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", 0o755, ld),
			imagebuild.Regular("/lib/x86_64-linux-gnu/libunused.so.1", 0o644, []byte("unused")),
		),
		"redis-tools": pkg(
			imagebuild.Regular("/usr/bin/redis-check-rdb", 0o700, getent),
			imagebuild.Regular("/usr/bin/redis-cli", 0o700, getent),
			imagebuild.Regular("/usr/bin/redis-benchmark", 0o755, getent),
		),
		"redis-server": pkg(imagebuild.Symlink("/usr/bin/redis-server", "redis-check-rdb")),
	}
}

// TestRedisRoot: the server (a link to redis-check-rdb, as Debian installs
// it) and redis-cli in the application layer, mode 0755; busybox, the C
// library they need (and nothing else of it) and a /data owned by the
// image's user in the system layer.
func TestRedisRoot(t *testing.T) {
	system, app, err := RedisRoot("amd64", redisPackages(t))
	if err != nil {
		t.Fatal(err)
	}
	paths := func(fs []imagebuild.File) map[string]imagebuild.File {
		m := map[string]imagebuild.File{}
		for _, f := range fs {
			m[f.Path] = f
		}
		return m
	}
	a, s := paths(app), paths(system)
	if len(a) != 3 || a["/usr/bin/redis-server"].Link != "redis-check-rdb" || a["/usr/bin/redis-cli"].Mode != 0o755 || a["/usr/bin/redis-check-rdb"].Mode != 0o755 {
		t.Errorf("application layer %v, want redis-server -> redis-check-rdb, redis-check-rdb and redis-cli (0755)", app)
	}
	for _, p := range []string{"/bin/busybox", "/bin/sh", "/etc/passwd", "/tmp", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"} {
		if _, ok := s[p]; !ok {
			t.Errorf("system layer lacks %s", p)
		}
	}
	for _, p := range []string{"/lib/x86_64-linux-gnu/libunused.so.1", "/usr/bin/redis-benchmark", "/usr/bin/redis-cli"} {
		if _, ok := s[p]; ok {
			t.Errorf("system layer has %s", p)
		}
	}
	if d := s[RedisDataDir]; !d.Mode.IsDir() || d.UID != UID || d.GID != GID {
		t.Errorf("%s is %+v, want a directory of %d:%d", RedisDataDir, d, UID, GID)
	}
}

func TestRedisRootErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(map[string]Package)
		want string
	}{
		{"no redis-tools", func(p map[string]Package) { delete(p, "redis-tools") }, "package redis-tools missing"},
		{"no redis-cli", func(p map[string]Package) { delete(p["redis-tools"].Files, "/usr/bin/redis-cli") }, "redis-tools has no /usr/bin/redis-cli"},
		{"no C library", func(p map[string]Package) { delete(p["libc6"].Files, "/lib/x86_64-linux-gnu/libc.so.6") }, "libc.so.6"},
		{"not an ELF", func(p map[string]Package) {
			p["redis-tools"].Files["/usr/bin/redis-cli"] = imagebuild.Regular("/usr/bin/redis-cli", 0o755, []byte("#!/bin/sh\n"))
		}, "/usr/bin/redis-cli"},
		{"a directory", func(p map[string]Package) {
			p["redis-server"].Files["/usr/bin/redis-server"] = imagebuild.File{Path: "/usr/bin/redis-server", Mode: fs.ModeDir | 0o755}
		}, "neither a file nor a symlink"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pkgs := redisPackages(t)
			tc.edit(pkgs)
			if _, _, err := RedisRoot("amd64", pkgs); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("RedisRoot: err %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, _, err := RedisRoot("arm64", redisPackages(t)); err == nil || !strings.Contains(err.Error(), "machine") {
		t.Errorf("amd64 binaries for arm64: err %v, want a machine mismatch", err)
	}
}

// TestRedisImageRuns runs the Redis image `make images` built (Debian's
// packages, nothing stood in), unpacked, as its user 65532 in a chroot whose
// root is read-only, in a network namespace of its own: redis-server
// starts with its data in /data (a tmpfs) and redis-cli talks to it.
func TestRedisImageRuns(t *testing.T) {
	path := archiveDir(t) + "/" + ArchiveName(RedisApp)
	if _, err := os.Stat(path); err != nil {
		t.Skipf("%s not built: run make images first", path)
	}
	if runtime.GOARCH != "amd64" {
		t.Skip("the application images run on amd64 only")
	}
	need.Root(t, "(chroot, mount and network namespaces)")
	for _, tool := range []string{"unshare", "chroot", "mount", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	imgs := readArchive(t, path, builtRefs(t, RedisApp)...)
	img := imgs["linux/amd64"]
	if img == nil {
		t.Fatalf("%s: no linux/amd64 image", path)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" || strings.Join(cf.Config.Entrypoint, " ") != "/usr/bin/redis-server" {
		t.Errorf("config user %q entrypoint %q, want 65532:65532 and /usr/bin/redis-server", cf.Config.User, cf.Config.Entrypoint)
	}
	for _, p := range RedisPackages {
		if !strings.Contains(cf.Config.Labels[LabelPackages], p+"=") {
			t.Errorf("label %s = %q lacks %s", LabelPackages, cf.Config.Labels[LabelPackages], p)
		}
	}
	root := t.TempDir()
	writeRoot(t, img, root)
	if err := os.Mkdir(root+"/dev", 0o755); err != nil { // a runtime's mount point
		t.Fatal(err)
	}
	script := `set -eu
echo "uid $(id -u)"
redis-server --port 6379 --bind 127.0.0.1 --dir /data --appendonly yes --logfile /data/log &
i=0
until [ "$(redis-cli ping 2>/dev/null)" = PONG ]; do
	i=$((i + 1)); [ $i -lt 300 ] || { echo "no PONG in 30s"; cat /data/log; exit 1; }
	sleep 0.1
done
redis-cli set k flock >/dev/null
echo "get $(redis-cli get k)"
redis-cli info server | grep '^redis_version:'
redis-cli info replication | grep '^role:'
redis-cli shutdown || true
wait
ls /data/appendonlydir >/dev/null && echo "aof ok"
if touch /should-not-exist 2>/dev/null; then echo "root fs writable"; exit 1; fi
echo "read-only ok"
`
	cmd := exec.Command("unshare", "--mount", "--net", "--propagation", "private", "--", "sh", "-c",
		`ip link set lo up && mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" &&
		mount -t tmpfs -o mode=1777 tmpfs "$1/data" && mount -t tmpfs -o mode=1777 tmpfs "$1/tmp" && mount --rbind /dev "$1/dev" &&
		exec chroot --userspec=65532:65532 "$1" /bin/sh -c "$2"`,
		"sh", root, script)
	cmd.Env = []string{"PATH=" + Path}
	out, err := runWithDeadline(cmd, 2*time.Minute)
	if err != nil {
		t.Fatalf("redis in the image: %v\n%s", err, out)
	}
	t.Logf("in the image:\n%s", out)
	for _, want := range []string{"uid 65532", "get flock", "redis_version:7.", "role:master", "aof ok", "read-only ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
