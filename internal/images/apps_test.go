package images

import (
	"context"
	"debug/elf"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildApps builds the application images from stand-ins: the host's
// getent (dynamically linked, like the cached etcd) for etcd and etcdctl,
// a static binary for upstream's peer-finder. Each image has its binaries,
// busybox as /bin/sh, and the C library the dynamic ones need.
func TestBuildApps(t *testing.T) {
	cache := t.TempDir()
	fakeDebs(t, cache)
	fakeRedisDebs(t, cache)
	fakeZookeeperDebs(t, cache)
	fakeMpiDebs(t, cache)
	fakeGaleraDebs(t, cache)
	bin := t.TempDir()
	dynamic, err := os.ReadFile("/usr/bin/getent")
	if err != nil {
		t.Skipf("needs the host's getent: %v", err)
	}
	paths := map[string][]byte{"etcd": dynamic, "etcdctl": dynamic, "peer-finder": fakeStatic(t, elf.EM_X86_64, "upstream")}
	for name, b := range paths {
		if err := os.WriteFile(filepath.Join(bin, name), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	archives, err := BuildApps(context.Background(), AppOptions{
		Options: Options{Repo: "ghcr.io/flockd", Tag: "dev", Aliases: []string{"latest"}, OutDir: t.TempDir(), DebCache: cache, Created: epoch, Logger: slog.New(slog.DiscardHandler)},
		Arch:    "amd64",
		Etcd:    filepath.Join(bin, "etcd"), Etcdctl: filepath.Join(bin, "etcdctl"), UpstreamPeerFinder: filepath.Join(bin, "peer-finder"),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"ghcr.io/flockd/apps/etcd:dev":                 {"/usr/local/bin/etcd", "/usr/local/bin/etcdctl", "/lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/libc.so.6"},
		"ghcr.io/flockd/apps/upstream-peer-finder:dev": {"/peer-finder"},
		"ghcr.io/flockd/apps/zookeeper:dev":            {"/usr/bin/zkServer.sh", "/usr/share/java/zookeeper.jar", jreHome + "/bin/java", "/lib/x86_64-linux-gnu/libc.so.6"},
		"ghcr.io/flockd/apps/redis:dev":                {"/usr/bin/redis-server", "/usr/bin/redis-cli", "/lib/x86_64-linux-gnu/libc.so.6", "/data"},
		"ghcr.io/flockd/apps/shared-hosts:dev":         {"/usr/bin/getent", "/etc/hosts", "/lib/x86_64-linux-gnu/libc.so.6"},
		"ghcr.io/flockd/apps/mpi:dev":                  {"/usr/bin/mpirun", "/usr/bin/python3", "/usr/sbin/sshd", "/lib/x86_64-linux-gnu/libc.so.6"},
		"ghcr.io/flockd/apps/galera:dev":               {"/usr/sbin/mariadbd", "/usr/bin/mariadb", "/usr/bin/wsrep_sst_rsync", "/usr/lib/libgalera_smm.so", "/var/lib/mysql"},
	}
	if len(archives) != len(want) {
		t.Fatalf("archives %v, want %d", archives, len(want))
	}
	for _, a := range archives {
		if filepath.Base(a.Path) != ArchiveName(a.Ref[len("ghcr.io/flockd/"):len(a.Ref)-len(":dev")]) {
			t.Errorf("%s: archive named %s", a.Ref, filepath.Base(a.Path))
		}
		imgs := readArchive(t, a.Path, a.Ref, strings.TrimSuffix(a.Ref, ":dev")+":latest")
		img := imgs["linux/amd64"]
		if len(imgs) != 1 || img == nil {
			t.Fatalf("%s: platforms %v, want linux/amd64 only", a.Ref, imgs)
		}
		files := flatten(t, img)
		for _, p := range append(want[a.Ref], "/bin/busybox", "/etc/passwd") {
			if _, ok := files[p]; !ok {
				t.Errorf("%s: no %s", a.Ref, p)
			}
		}
		if sh := files["/bin/sh"]; sh.Link != "busybox" {
			t.Errorf("%s: /bin/sh is %+v, want a link to busybox", a.Ref, sh)
		}
		delete(want, a.Ref)
	}
	for ref := range want {
		t.Errorf("no archive of %s", ref)
	}
}
