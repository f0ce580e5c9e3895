package images

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/flockd/flock/internal/imagebuild"
)

// GaleraApp is ghcr.io/flockd/apps/galera: Debian's MariaDB server
// (mariadbd, 10.11) with the Galera 4 provider, the mariadb client, and
// what a state snapshot transfer by rsync runs (wsrep_sst_rsync: bash,
// rsync, ss to see the rsync daemon listen, procps' ps -p), with busybox
// for the rest of the scripts.
const GaleraApp = "apps/galera"

// Directories of the Galera image owned by the image's user (UID:GID), so
// mariadbd runs as non-root with or without volumes there: the data
// directory and the directory of the server's socket (the client's
// compiled-in default, /run/mysqld/mysqld.sock).
const (
	GaleraDataDir   = "/var/lib/mysql"
	GaleraSocketDir = "/run/mysqld"
)

// GaleraPackages are the Debian packages of the Galera image (per
// architecture): the shells, the server, client and provider, rsync, ss
// (iproute2), ps (procps), and the libraries their binaries link,
// transitively (GaleraRoot fails when one is missing).
var GaleraPackages = []string{
	"busybox-static", "bash-static",
	"mariadb-server", "mariadb-server-core", "mariadb-client-core", "galera-4", "rsync", "iproute2", "procps",
	"libc6", "libgcc-s1", "libstdc++6", "zlib1g", "libssl3", "libpcre2-8-0", "libcrypt1", "liburing2",
	"libaio1", "libnuma1", "libsystemd0", "libcap2", "libgcrypt20", "libgpg-error0", "liblzma5", "libzstd1",
	"liblz4-1", "libedit2", "libbsd0", "libmd0", "libncurses6", "libtinfo6", "libacl1", "libpopt0",
	"libxxhash0", "libselinux1", "libtirpc3", "libmnl0", "libgssapi-krb5-2", "libkrb5-3", "libk5crypto3",
	"libcom-err2", "libkrb5support0", "libkeyutils1", "libproc2-0",
}

// galeraFiles are what the Galera image takes from GaleraPackages: a path,
// or every file under a path ending in "/". The server's SQL and messages
// (/usr/share/mysql) are what mariadb-install-db and mariadbd read; the
// provider is where the packages put it, with its link in /usr/lib/galera.
var galeraFiles = []struct{ pkg, path string }{
	{"mariadb-server-core", "/usr/sbin/mariadbd"},
	{"mariadb-server-core", "/usr/bin/mariadb-install-db"},
	{"mariadb-server-core", "/usr/bin/resolveip"},
	{"mariadb-server-core", "/usr/share/mysql/"},
	{"mariadb-client-core", "/usr/bin/mariadb"},
	{"mariadb-client-core", "/usr/bin/mysql"},
	{"mariadb-client-core", "/usr/bin/my_print_defaults"},
	{"mariadb-server", "/usr/bin/wsrep_sst_common"},
	{"mariadb-server", "/usr/bin/wsrep_sst_rsync"},
	{"galera-4", "/usr/lib/libgalera_smm.so"},
	{"galera-4", "/usr/lib/galera/libgalera_smm.so"},
	{"rsync", "/usr/bin/rsync"},
	{"iproute2", "/bin/ss"},
	{"procps", "/bin/ps"},
}

// GaleraRoot returns the Galera image's root filesystem for goarch in two
// layers: the system (busybox, bash, /etc, the owned directories, the
// libraries) and the application (galeraFiles). pkgs must hold
// GaleraPackages for goarch; the libraries are looked up in all of them.
func GaleraRoot(goarch string, pkgs map[string]Package) (system, app []imagebuild.File, err error) {
	triplet, ok := triplets[goarch]
	if !ok {
		return nil, nil, fmt.Errorf("galera image: unsupported GOARCH %q", goarch)
	}
	files, err := shell(pkgs)
	if err != nil {
		return nil, nil, fmt.Errorf("galera image: %w", err)
	}
	if err := addBash(files, pkgs); err != nil {
		return nil, nil, fmt.Errorf("galera image: %w", err)
	}
	for _, d := range []string{GaleraDataDir, GaleraSocketDir} {
		files[d] = imagebuild.File{Path: d, Mode: fs.ModeDir | 0o755, UID: UID, GID: GID}
	}
	var elfs []string
	inApp := map[string]bool{}
	for _, w := range galeraFiles {
		p, ok := pkgs[w.pkg]
		if !ok {
			return nil, nil, fmt.Errorf("galera image: package %s missing", w.pkg)
		}
		n := 0
		for path, f := range p.Files {
			if path != w.path && (!strings.HasSuffix(w.path, "/") || !strings.HasPrefix(path, w.path)) || f.Mode.IsDir() {
				continue
			}
			f.UID, f.GID = 0, 0
			if f.Mode.IsRegular() {
				if h, err := imagebuild.ReadELFHead(f.Data); err == nil {
					if h.Machine != machines[goarch] {
						return nil, nil, fmt.Errorf("galera image: %s: ELF machine %v is not GOARCH %s", path, h.Machine, goarch)
					}
					elfs = append(elfs, path)
				}
			}
			files[path] = f
			inApp[path] = true
			app = append(app, f)
			n++
		}
		if n == 0 {
			return nil, nil, fmt.Errorf("galera image: %s has no %s", w.pkg, w.path)
		}
	}
	libs := map[string]imagebuild.File{}
	for _, p := range pkgs {
		for path, f := range p.Files {
			libs[path] = f
		}
	}
	if _, err := imagebuild.WithLibraries(files, libs, []string{"/lib/" + triplet, "/usr/lib/" + triplet}, elfs...); err != nil {
		return nil, nil, fmt.Errorf("galera image: %w", err)
	}
	for p, f := range files {
		if !inApp[p] {
			system = append(system, f)
		}
	}
	return sortFiles(system), sortFiles(app), nil
}

// addBash adds bash-static's bash as /bin/bash, with /usr/bin/bash and
// /usr/bin/env (busybox) for scripts starting "#!/usr/bin/env bash".
func addBash(files map[string]imagebuild.File, pkgs map[string]Package) error {
	bash, ok := pkgs["bash-static"]
	if !ok {
		return errors.New("package bash-static missing")
	}
	b, ok := bash.Files["/bin/bash-static"]
	if !ok || !b.Mode.IsRegular() {
		return errors.New("bash-static has no /bin/bash-static")
	}
	b.Path, b.Mode, b.UID, b.GID = "/bin/bash", 0o755, 0, 0
	files[b.Path] = b
	files["/usr/bin/bash"] = imagebuild.Symlink("/usr/bin/bash", "/bin/bash")
	files["/usr/bin/env"] = imagebuild.Symlink("/usr/bin/env", "/bin/busybox")
	return nil
}

// buildGalera builds the Galera image for o.Arch.
func buildGalera(ctx context.Context, o AppOptions) (Archive, error) {
	pkgs, err := unpack(ctx, o.DebCache, o.Arch, GaleraPackages)
	if err != nil {
		return Archive{}, err
	}
	system, app, err := GaleraRoot(o.Arch, pkgs)
	if err != nil {
		return Archive{}, err
	}
	return writeApp(o, GaleraApp, imagebuild.Config{
		Entrypoint: []string{"/usr/sbin/mariadbd"},
		User:       fmt.Sprintf("%d:%d", UID, GID),
	}, pkgs, system, app)
}
