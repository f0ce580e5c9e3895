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
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/flockd/flock/internal/imagebuild"
)

// Source is the images' org.opencontainers.image.source.
const Source = "https://github.com/flockd/flock"

// Names of the images (and of their binaries and archives).
const (
	PeerFinder = "peer-finder"
	Controller = "flock-controller"
	Pause      = "pause"
)

// LabelPackages lists the Debian packages in an image as "name=version",
// space-separated.
const LabelPackages = "io.flockd.image.debian-packages"

// Options say what Build reads and writes.
type Options struct {
	// Repo and Tag name the images: Repo + "/" + name + ":" + Tag. Tag is
	// the version (also the org.opencontainers.image.version label).
	Repo, Tag string
	// Aliases are more tags for the same images, after Tag (make images
	// adds "dev", the local cluster's and the tests' name).
	Aliases []string
	// Arches are the GOARCH values to build for (linux only).
	Arches []string
	// BinDir holds <arch>/<name> for each image's binary.
	BinDir string
	// OutDir receives <name>.tar for each image.
	OutDir string
	// DebCache keeps the Debian packages, as <arch>/*.deb and all/*.deb.
	DebCache string
	// Created is the creation time and every file's mtime.
	Created time.Time
	// Revision is the source's commit (org.opencontainers.image.revision).
	Revision string
	// Logger gets one record per archive written; slog.Default() when nil.
	Logger *slog.Logger
}

// Archive is one written image.
type Archive struct {
	Ref, Path string
	// Aliases are the archive's other names (Options.Aliases).
	Aliases []string
}

// Build builds peer-finder, flock-controller and pause for every arch and
// writes them as OCI archives (one image index of all arches each).
func Build(ctx context.Context, o Options) ([]Archive, error) {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	if o.Repo == "" || o.Tag == "" || len(o.Arches) == 0 || o.BinDir == "" || o.OutDir == "" || o.DebCache == "" {
		return nil, errors.New("images: Repo, Tag, Arches, BinDir, OutDir and DebCache are required")
	}
	ca, err := unpack(ctx, o.DebCache, "all", ControllerPackages)
	if err != nil {
		return nil, err
	}
	built := map[string][]v1.Image{}
	for _, arch := range o.Arches {
		bins := map[string][]byte{}
		for _, name := range []string{PeerFinder, Controller, Pause} {
			b, err := os.ReadFile(filepath.Join(o.BinDir, arch, name))
			if err != nil {
				return nil, fmt.Errorf("images: binary (run make images): %w", err)
			}
			bins[name] = b
		}
		pkgs, err := unpack(ctx, o.DebCache, arch, PeerFinderPackages)
		if err != nil {
			return nil, err
		}

		system, app, err := PeerFinderRoot(arch, bins[PeerFinder], pkgs)
		if err != nil {
			return nil, err
		}
		img, err := image(o, arch, imagebuild.Config{
			Entrypoint: []string{"/" + PeerFinder},
			User:       fmt.Sprintf("%d:%d", UID, GID),
		}, PeerFinder, pkgs, system, app)
		if err != nil {
			return nil, err
		}
		built[PeerFinder] = append(built[PeerFinder], img)

		system, app, err = ControllerRoot(arch, bins[Controller], ca[ControllerPackages[0]])
		if err != nil {
			return nil, err
		}
		img, err = image(o, arch, imagebuild.Config{
			Entrypoint: []string{"/" + Controller},
			User:       fmt.Sprintf("%d:%d", UID, GID),
		}, Controller, ca, system, app)
		if err != nil {
			return nil, err
		}
		built[Controller] = append(built[Controller], img)

		root, err := PauseRoot(arch, bins[Pause])
		if err != nil {
			return nil, err
		}
		img, err = image(o, arch, imagebuild.Config{
			Entrypoint: []string{"/" + Pause},
			User:       fmt.Sprintf("%d:%d", PauseUID, PauseUID),
		}, Pause, nil, root)
		if err != nil {
			return nil, err
		}
		built[Pause] = append(built[Pause], img)
	}

	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	var out []Archive
	for _, name := range []string{PeerFinder, Controller, Pause} {
		ref := o.Repo + "/" + name + ":" + o.Tag
		idx, err := imagebuild.Index(labels(o, name), built[name]...)
		if err != nil {
			return nil, fmt.Errorf("images: %s: %w", name, err)
		}
		a := Archive{Ref: ref, Path: filepath.Join(o.OutDir, name+".tar")}
		for _, t := range o.Aliases {
			a.Aliases = append(a.Aliases, o.Repo+"/"+name+":"+t)
		}
		if err := imagebuild.WriteArchiveNames(a.Path, append([]string{ref}, a.Aliases...), idx, o.Created); err != nil {
			return nil, fmt.Errorf("images: %s: %w", name, err)
		}
		digest, err := idx.Digest()
		if err != nil {
			return nil, fmt.Errorf("images: %s: %w", name, err)
		}
		log.Info("image written", "ref", ref, "aliases", strings.Join(a.Aliases, ","), "path", a.Path, "digest", digest.String(), "arches", strings.Join(o.Arches, ","))
		out = append(out, a)
	}
	return out, nil
}

// image builds one platform's image of layers (each a list of files).
func image(o Options, arch string, cfg imagebuild.Config, name string, pkgs map[string]Package, layers ...[]imagebuild.File) (v1.Image, error) {
	cfg.OS, cfg.Architecture = "linux", arch
	cfg.Env = []string{"PATH=" + Path}
	cfg.WorkingDir = "/"
	cfg.Created = o.Created
	cfg.Labels = labels(o, name)
	if len(pkgs) > 0 {
		var list []string
		for _, p := range pkgs {
			list = append(list, p.Deb.String())
		}
		slices.Sort(list)
		cfg.Labels[LabelPackages] = strings.Join(list, " ")
	}
	ls := make([]v1.Layer, 0, len(layers))
	for _, files := range layers {
		l, err := imagebuild.Layer(files, o.Created)
		if err != nil {
			return nil, fmt.Errorf("images: %s %s: %w", name, arch, err)
		}
		ls = append(ls, l)
	}
	img, err := imagebuild.Image(cfg, ls...)
	if err != nil {
		return nil, fmt.Errorf("images: %s %s: %w", name, arch, err)
	}
	return img, nil
}

// labels are the OCI annotations of an image (also its index's).
func labels(o Options, name string) map[string]string {
	m := map[string]string{
		"org.opencontainers.image.title":   name,
		"org.opencontainers.image.source":  Source,
		"org.opencontainers.image.version": o.Tag,
		"org.opencontainers.image.created": o.Created.UTC().Format(time.RFC3339),
	}
	if o.Revision != "" {
		m["org.opencontainers.image.revision"] = o.Revision
	}
	return m
}

// unpack downloads (or reuses) and unpacks the named packages of arch.
func unpack(ctx context.Context, cache, arch string, names []string) (map[string]Package, error) {
	debs, err := imagebuild.Download(ctx, filepath.Join(cache, arch), arch, names...)
	if err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	pkgs := make(map[string]Package, len(debs))
	for _, d := range debs {
		files, err := d.Files(ctx)
		if err != nil {
			return nil, fmt.Errorf("images: %w", err)
		}
		pkgs[d.Name] = Package{Deb: d, Files: files}
	}
	return pkgs, nil
}
