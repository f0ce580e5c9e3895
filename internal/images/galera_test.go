package images

import (
	"context"
	"io/fs"
	"os"
	"strings"
	"testing"
)

// fakeGaleraDebs writes the Galera image's packages that fakeDebs does
// not: its binaries and the provider are the host's getent (dynamic, needs
// only the C library), its scripts and data text, with what the image
// leaves out beside them; the libraries are packages holding only a
// copyright file.
func fakeGaleraDebs(t *testing.T, cache string) {
	t.Helper()
	getent, err := os.ReadFile("/usr/bin/getent")
	if err != nil {
		t.Skipf("needs the host's getent: %v", err)
	}
	elf := string(getent)
	files := map[string]map[string]string{
		"mariadb-server-core": {
			"/usr/sbin/mariadbd": elf, "/usr/bin/mariadb-install-db": "#!/bin/sh\n", "/usr/bin/resolveip": elf,
			"/usr/share/mysql/english/errmsg.sys": "errmsg", "/usr/share/mysql/mysql_system_tables.sql": "sql",
			"/usr/bin/innochecksum": elf,
		},
		"mariadb-client-core": {"/usr/bin/mariadb": elf, "/usr/bin/mysql": "->mariadb", "/usr/bin/my_print_defaults": elf, "/usr/bin/mariadb-check": elf},
		"mariadb-server": {
			"/usr/bin/wsrep_sst_common": "# sourced\n", "/usr/bin/wsrep_sst_rsync": "#!/usr/bin/env bash\n",
			"/usr/bin/wsrep_sst_mariabackup": "#!/usr/bin/env bash\n", "/etc/mysql/mariadb.conf.d/50-server.cnf": "[mysqld]\n",
		},
		"galera-4": {"/usr/lib/libgalera_smm.so": elf, "/usr/lib/galera/libgalera_smm.so": "->../libgalera_smm.so", "/usr/bin/garbd": elf},
		"rsync":    {"/usr/bin/rsync": elf},
		"iproute2": {"/bin/ss": elf, "/sbin/tc": elf},
		"procps":   {"/bin/ps": elf, "/usr/bin/top": elf},
	}
	for _, p := range GaleraPackages {
		switch p {
		case "busybox-static", "bash-static", "libc6":
			continue
		}
		f, ok := files[p]
		if !ok {
			f = map[string]string{"usr/share/doc/" + p + "/copyright": p}
		}
		fakeDeb(t, cache, p, "1.0", "amd64", f)
	}
}

// TestGaleraRoot checks the Galera image's files: the server, client,
// provider and state-transfer tools with the C library they link, bash for
// the rsync transfer script, the data and socket directories owned by the
// image's user; not the packages' other files; and a missing package is an
// error.
func TestGaleraRoot(t *testing.T) {
	cache := t.TempDir()
	fakeDebs(t, cache)
	fakeGaleraDebs(t, cache)
	pkgs, err := unpack(context.Background(), cache, "amd64", GaleraPackages)
	if err != nil {
		t.Fatal(err)
	}
	system, app, err := GaleraRoot("amd64", pkgs)
	if err != nil {
		t.Fatal(err)
	}
	links := map[string]string{}
	owner := map[string]int{}
	inApp := map[string]bool{}
	for _, f := range app {
		inApp[f.Path] = true
		links[f.Path] = f.Link
	}
	for _, f := range system {
		if inApp[f.Path] {
			t.Errorf("%s in both layers", f.Path)
		}
		links[f.Path] = f.Link
		if f.Mode.IsDir() {
			owner[f.Path] = f.UID
		}
	}
	for _, w := range galeraFiles {
		if !strings.HasSuffix(w.path, "/") && !inApp[w.path] {
			t.Errorf("application layer has no %s", w.path)
		}
	}
	for _, p := range []string{"/usr/share/mysql/english/errmsg.sys", "/usr/share/mysql/mysql_system_tables.sql"} {
		if !inApp[p] {
			t.Errorf("application layer has no %s", p)
		}
	}
	for p, want := range map[string]string{
		"/usr/bin/mysql": "mariadb", "/usr/lib/galera/libgalera_smm.so": "../libgalera_smm.so",
		"/usr/bin/env": "/bin/busybox", "/usr/bin/bash": "/bin/bash", "/bin/sh": "busybox",
	} {
		if got, ok := links[p]; !ok || got != want {
			t.Errorf("%s -> %q (present %v), want -> %q", p, got, ok, want)
		}
	}
	for _, p := range []string{"/bin/bash", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2", "/etc/passwd"} {
		if _, ok := links[p]; !ok {
			t.Errorf("system layer has no %s", p)
		}
	}
	for _, d := range []string{GaleraDataDir, GaleraSocketDir} {
		if uid, ok := owner[d]; !ok || uid != UID {
			t.Errorf("%s: owner %d (present %v), want the image's user %d", d, uid, ok, UID)
		}
	}
	for _, p := range []string{"/usr/bin/innochecksum", "/usr/bin/mariadb-check", "/usr/bin/wsrep_sst_mariabackup", "/etc/mysql/mariadb.conf.d/50-server.cnf", "/usr/bin/garbd", "/sbin/tc", "/usr/bin/top"} {
		if _, ok := links[p]; ok {
			t.Errorf("image has %s", p)
		}
	}
	for _, f := range system {
		if f.Path == "/bin/bash" && (f.Mode&fs.ModePerm) != 0o755 {
			t.Errorf("/bin/bash mode %v", f.Mode)
		}
	}

	delete(pkgs, "rsync")
	if _, _, err := GaleraRoot("amd64", pkgs); err == nil || !strings.Contains(err.Error(), "rsync") {
		t.Errorf("without rsync: err %v, want one naming the package", err)
	}
}
