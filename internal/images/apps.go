package images

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/flockd/flock/internal/imagebuild"
)

// Application images: the real applications flock bootstraps in
// examples/apps, each with the application's own CLI and a POSIX shell
// (busybox) for the example scripts. They are built for the machine's
// architecture only, from binaries built here (the local cluster's etcd and
// etcdctl) and Debian packages.
const (
	// EtcdApp is ghcr.io/flockd/apps/etcd: etcd and etcdctl.
	EtcdApp = "apps/etcd"
	// UpstreamApp holds Kubernetes' own peer-finder (test/images/pets) at
	// /peer-finder, with busybox to copy it: the "install" init container of
	// upstream's e2e manifests, for the side-by-side campaign and tests.
	// Never published.
	UpstreamApp = "apps/upstream-peer-finder"
)

// AppPackages are the Debian packages of the application images (per
// architecture): the shell and the C library the cached binaries link.
var AppPackages = []string{"busybox-static", "libc6"}

// AppOptions say what BuildApps reads and writes: Options' Repo, Tag,
// OutDir, DebCache, Created, Revision and Logger (not Arches or BinDir).
type AppOptions struct {
	Options
	// Arch is the GOARCH of the binaries below.
	Arch string
	// Etcd, Etcdctl and UpstreamPeerFinder are the binaries' paths.
	Etcd, Etcdctl, UpstreamPeerFinder string
}

// ArchiveName is the archive file of an application image: apps/etcd is
// apps-etcd.tar.
func ArchiveName(app string) string { return strings.ReplaceAll(app, "/", "-") + ".tar" }

// shell returns busybox with its applets as /bin/*, and /etc.
func shell(pkgs map[string]Package) (map[string]imagebuild.File, error) {
	p, ok := pkgs["busybox-static"]
	if !ok {
		return nil, errors.New("package busybox-static missing")
	}
	bb, ok := p.Files["/bin/busybox"]
	if !ok || !bb.Mode.IsRegular() {
		return nil, errors.New("busybox-static has no /bin/busybox")
	}
	bb.Mode, bb.UID, bb.GID = 0o755, 0, 0
	files := map[string]imagebuild.File{bb.Path: bb}
	for _, a := range Applets {
		files["/bin/"+a] = imagebuild.Symlink("/bin/"+a, "busybox")
	}
	for _, f := range etc("/bin/sh") {
		files[f.Path] = f
	}
	return files, nil
}

// AppRoot returns an application image's root filesystem: the system layer
// (busybox, /etc, /tmp, and the C library the binaries need) and the
// application layer (each binary at its path, mode 0755). pkgs must hold
// AppPackages for goarch.
func AppRoot(goarch string, bins map[string][]byte, pkgs map[string]Package) (system, app []imagebuild.File, err error) {
	triplet, ok := triplets[goarch]
	if !ok {
		return nil, nil, fmt.Errorf("unsupported GOARCH %q", goarch)
	}
	files, err := shell(pkgs)
	if err != nil {
		return nil, nil, err
	}
	var paths []string
	for p, data := range bins {
		h, err := imagebuild.ReadELFHead(data)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", p, err)
		}
		if h.Machine != machines[goarch] {
			return nil, nil, fmt.Errorf("%s: ELF machine %v is not GOARCH %s", p, h.Machine, goarch)
		}
		app = append(app, imagebuild.Regular(p, 0o755, data))
		files[p] = imagebuild.Regular(p, 0o755, data)
		paths = append(paths, p)
	}
	libc, ok := pkgs["libc6"]
	if !ok {
		return nil, nil, errors.New("package libc6 missing")
	}
	if _, err := imagebuild.WithLibraries(files, libc.Files, []string{"/lib/" + triplet, "/usr/lib/" + triplet}, paths...); err != nil {
		return nil, nil, err
	}
	for p, f := range files {
		if _, isApp := bins[p]; !isApp {
			system = append(system, f)
		}
	}
	return sortFiles(system), sortFiles(app), nil
}

// BuildApps writes the application images (EtcdApp, UpstreamApp,
// RedisApp, ZookeeperApp, SharedHostsApp, MpiApp, GaleraApp) as OCI archives named by ArchiveName in o.OutDir.
func BuildApps(ctx context.Context, o AppOptions) ([]Archive, error) {
	if o.Repo == "" || o.Tag == "" || o.Arch == "" || o.OutDir == "" || o.DebCache == "" {
		return nil, errors.New("apps images: Repo, Tag, Arch, OutDir and DebCache are required")
	}
	pkgs, err := unpack(ctx, o.DebCache, o.Arch, AppPackages)
	if err != nil {
		return nil, err
	}
	read := func(paths map[string]string) (map[string][]byte, error) {
		out := map[string][]byte{}
		for in, from := range paths {
			b, err := os.ReadFile(from)
			if err != nil {
				return nil, fmt.Errorf("apps images (run make cluster-build): %w", err)
			}
			out[in] = b
		}
		return out, nil
	}
	apps := []struct {
		name string
		bins map[string]string
		cfg  imagebuild.Config
	}{
		{EtcdApp, map[string]string{"/usr/local/bin/etcd": o.Etcd, "/usr/local/bin/etcdctl": o.Etcdctl},
			imagebuild.Config{Entrypoint: []string{"/usr/local/bin/etcd"}}},
		{UpstreamApp, map[string]string{"/peer-finder": o.UpstreamPeerFinder},
			imagebuild.Config{Entrypoint: []string{"/bin/cp", "/peer-finder"}}},
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("apps images: %w", err)
	}
	var out []Archive
	for _, a := range apps {
		bins, err := read(a.bins)
		if err != nil {
			return nil, err
		}
		system, app, err := AppRoot(o.Arch, bins, pkgs)
		if err != nil {
			return nil, fmt.Errorf("apps images: %s: %w", a.name, err)
		}
		arc, err := writeApp(o, a.name, a.cfg, pkgs, system, app)
		if err != nil {
			return nil, err
		}
		out = append(out, arc)
	}
	// The images made of Debian packages only.
	for _, build := range []func(context.Context, AppOptions) (Archive, error){buildRedis, buildZookeeper, buildSharedHosts, buildMpi, buildGalera} {
		arc, err := build(ctx, o)
		if err != nil {
			return nil, err
		}
		out = append(out, arc)
	}
	return out, nil
}

// unpackApp unpacks an application image's packages: arch of o.Arch,
// indep architecture-independent ("all"); all holds both, for the image's
// package label.
func unpackApp(ctx context.Context, o AppOptions, arch, indep []string) (pkgs, common, all map[string]Package, err error) {
	if pkgs, err = unpack(ctx, o.DebCache, o.Arch, arch); err != nil {
		return nil, nil, nil, err
	}
	if common, err = unpack(ctx, o.DebCache, "all", indep); err != nil {
		return nil, nil, nil, err
	}
	all = map[string]Package{}
	for _, m := range []map[string]Package{pkgs, common} {
		for k, p := range m {
			all[k] = p
		}
	}
	return pkgs, common, all, nil
}

// writeApp writes one application image of the machine's architecture as
// an OCI archive named by ArchiveName in o.OutDir, named like flock's own
// images: the tag and its aliases (make images: the version and dev; the
// examples and tests use dev).
func writeApp(o AppOptions, name string, cfg imagebuild.Config, pkgs map[string]Package, layers ...[]imagebuild.File) (Archive, error) {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	img, err := image(o.Options, o.Arch, cfg, name, pkgs, layers...)
	if err != nil {
		return Archive{}, err
	}
	ref := o.Repo + "/" + name + ":" + o.Tag
	idx, err := imagebuild.Index(labels(o.Options, name), []v1.Image{img}...)
	if err != nil {
		return Archive{}, fmt.Errorf("apps images: %s: %w", name, err)
	}
	arc := Archive{Ref: ref, Path: filepath.Join(o.OutDir, ArchiveName(name))}
	for _, t := range o.Aliases {
		arc.Aliases = append(arc.Aliases, o.Repo+"/"+name+":"+t)
	}
	if err := imagebuild.WriteArchiveNames(arc.Path, append([]string{ref}, arc.Aliases...), idx, o.Created); err != nil {
		return Archive{}, fmt.Errorf("apps images: %s: %w", name, err)
	}
	log.Info("image written", "ref", ref, "aliases", strings.Join(arc.Aliases, ","), "path", arc.Path, "arches", o.Arch)
	return arc, nil
}

// picked is what pickContent returns: the image's files (busybox, /etc,
// and the content packages' files), the pool WithLibraries takes libraries
// from (the library packages and the content), which files are the
// application layer's, and the ELF files among them, sorted.
type picked struct {
	files, from map[string]imagebuild.File
	inApp       map[string]bool
	elfs        []string
}

// pickContent starts an image made of Debian packages: the shell, the files
// keep picks from the content packages (owned by root), and every file of
// the library packages as the pool of libraries. A content package found
// in neither pkgs nor common, a library package not in pkgs, or no file
// picked is an error.
func pickContent(pkgs, common map[string]Package, content, libs []string, keep func(pkg, p string) bool) (picked, error) {
	files, err := shell(pkgs)
	if err != nil {
		return picked{}, err
	}
	r := picked{files: files, from: map[string]imagebuild.File{}, inApp: map[string]bool{}}
	for _, n := range libs {
		p, ok := pkgs[n]
		if !ok {
			return picked{}, fmt.Errorf("package %s missing", n)
		}
		for k, f := range p.Files {
			r.from[k] = f
		}
	}
	for _, n := range content {
		p, ok := pkgs[n]
		if !ok {
			p, ok = common[n]
		}
		if !ok {
			return picked{}, fmt.Errorf("package %s missing", n)
		}
		for k, f := range p.Files {
			if f.Mode.IsDir() || !keep(n, k) {
				continue
			}
			f.UID, f.GID = 0, 0
			if f.Mode.IsRegular() {
				if _, err := imagebuild.ReadELFHead(f.Data); err == nil {
					r.elfs = append(r.elfs, k)
				}
			}
			r.files[k], r.from[k], r.inApp[k] = f, f, true
		}
	}
	if len(r.inApp) == 0 {
		return picked{}, fmt.Errorf("no files taken from %v", content)
	}
	slices.Sort(r.elfs)
	return r, nil
}

// layers splits the image's files into the system and application layers.
func (r picked) layers() (system, app []imagebuild.File) {
	for p, f := range r.files {
		if r.inApp[p] {
			app = append(app, f)
		} else {
			system = append(system, f)
		}
	}
	return sortFiles(system), sortFiles(app)
}
