package images

import (
	"context"
	"fmt"
	"io/fs"

	"github.com/flockd/flock/internal/imagebuild"
)

// RedisApp is ghcr.io/flockd/apps/redis: Debian's Redis server and
// redis-cli, for examples/apps/redis.
const RedisApp = "apps/redis"

// RedisDataDir is the Redis image's working directory for its data, owned
// by the image's user (UID:GID) so it runs as non-root with or without a
// volume there.
const RedisDataDir = "/data"

// RedisPackages are the Debian packages of the Redis image (per
// architecture): the shell, redis-server (whose /usr/bin/redis-server links
// to redis-tools' binary), redis-tools (redis-cli), and the libraries those
// binaries need, transitively (RedisRoot fails when one is missing).
var RedisPackages = []string{
	"busybox-static", "redis-server", "redis-tools",
	"libc6", "libatomic1", "libjemalloc2", "liblzf1", "libssl3", "libsystemd0",
	"libstdc++6", "libgcc-s1", "libcap2", "libgcrypt20", "libgpg-error0", "liblzma5", "libzstd1", "liblz4-1",
}

// redisBinaries are the files the Redis image takes from the Redis
// packages: the server is redis-check-rdb under another name (it picks its
// mode by argv[0]), as the packages install it.
var redisBinaries = []struct{ pkg, path string }{
	{"redis-tools", "/usr/bin/redis-check-rdb"},
	{"redis-tools", "/usr/bin/redis-cli"},
	{"redis-server", "/usr/bin/redis-server"},
}

// RedisRoot returns the Redis image's root filesystem: the system layer
// (busybox, /etc, /tmp, RedisDataDir, the libraries) and the application
// layer (redisBinaries). pkgs must hold RedisPackages for goarch; the
// libraries are looked up in all of them.
func RedisRoot(goarch string, pkgs map[string]Package) (system, app []imagebuild.File, err error) {
	triplet, ok := triplets[goarch]
	if !ok {
		return nil, nil, fmt.Errorf("unsupported GOARCH %q", goarch)
	}
	files, err := shell(pkgs)
	if err != nil {
		return nil, nil, err
	}
	files[RedisDataDir] = imagebuild.File{Path: RedisDataDir, Mode: fs.ModeDir | 0o755, UID: UID, GID: GID}
	var elfs []string
	for _, b := range redisBinaries {
		p, ok := pkgs[b.pkg]
		if !ok {
			return nil, nil, fmt.Errorf("package %s missing", b.pkg)
		}
		f, ok := p.Files[b.path]
		if !ok {
			return nil, nil, fmt.Errorf("%s has no %s", b.pkg, b.path)
		}
		f.UID, f.GID = 0, 0
		switch {
		case f.Mode.IsRegular():
			h, err := imagebuild.ReadELFHead(f.Data)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", b.path, err)
			}
			if h.Machine != machines[goarch] {
				return nil, nil, fmt.Errorf("%s: ELF machine %v is not GOARCH %s", b.path, h.Machine, goarch)
			}
			f.Mode = 0o755
			elfs = append(elfs, b.path)
		case f.Mode.Type() != fs.ModeSymlink:
			return nil, nil, fmt.Errorf("%s: %s is neither a file nor a symlink", b.pkg, b.path)
		}
		files[b.path] = f
		app = append(app, f)
	}
	libs := map[string]imagebuild.File{}
	for _, p := range pkgs {
		for path, f := range p.Files {
			libs[path] = f
		}
	}
	if _, err := imagebuild.WithLibraries(files, libs, []string{"/lib/" + triplet, "/usr/lib/" + triplet}, elfs...); err != nil {
		return nil, nil, err
	}
	inApp := map[string]bool{}
	for _, f := range app {
		inApp[f.Path] = true
	}
	for p, f := range files {
		if !inApp[p] {
			system = append(system, f)
		}
	}
	return sortFiles(system), sortFiles(app), nil
}

// buildRedis writes the Redis image (RedisApp) as an OCI archive in
// o.OutDir, from RedisPackages.
func buildRedis(ctx context.Context, o AppOptions) (Archive, error) {
	pkgs, err := unpack(ctx, o.DebCache, o.Arch, RedisPackages)
	if err != nil {
		return Archive{}, err
	}
	system, app, err := RedisRoot(o.Arch, pkgs)
	if err != nil {
		return Archive{}, fmt.Errorf("apps images: %s: %w", RedisApp, err)
	}
	return writeApp(o, RedisApp, imagebuild.Config{
		Entrypoint: []string{"/usr/bin/redis-server"},
		User:       fmt.Sprintf("%d:%d", UID, GID),
	}, pkgs, system, app)
}
