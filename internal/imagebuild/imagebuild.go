// Package imagebuild builds OCI images from files, without a base image and
// without a registry, on top of go-containerregistry.
//
// The flow is pure up to the last step: Files -> Layer -> Image (one
// platform) -> Index (all platforms) -> WriteArchive (an OCI image layout,
// tarred into one file that `ctr images import` and `docker load` read).
// Layers are reproducible: entries sorted by path, one fixed modification
// time, numeric owners only, gzip without a timestamp.
package imagebuild

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// File is one entry of a layer: a regular file, a directory or a symlink.
type File struct {
	// Path is absolute and clean, e.g. "/bin/bash".
	Path string
	// Mode holds the type (0 for a regular file, fs.ModeDir, fs.ModeSymlink)
	// and the permissions, including fs.ModeSetuid, fs.ModeSetgid and
	// fs.ModeSticky.
	Mode fs.FileMode
	// Data is a regular file's content.
	Data []byte
	// Link is a symlink's target.
	Link string
	// UID and GID own the entry.
	UID, GID int
}

// Regular returns a regular file owned by root.
func Regular(p string, perm fs.FileMode, data []byte) File {
	return File{Path: p, Mode: perm, Data: data}
}

// Dir returns a directory owned by root.
func Dir(p string, perm fs.FileMode) File {
	return File{Path: p, Mode: fs.ModeDir | perm}
}

// Symlink returns a symlink at p pointing to target.
func Symlink(p, target string) File {
	return File{Path: p, Mode: fs.ModeSymlink | 0o777, Link: target}
}

// Layer returns a gzip-compressed OCI layer holding files. Entries are
// sorted by path; parent directories that files do not list are added as
// root-owned 0755 directories. Every entry gets mtime. Two files with the
// same path are an error.
func Layer(files []File, mtime time.Time) (v1.Layer, error) {
	entries, err := normalize(files)
	if err != nil {
		return nil, err
	}
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	for _, f := range entries {
		hdr, err := header(f, mtime)
		if err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", f.Path, err)
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write(f.Data); err != nil {
				return nil, fmt.Errorf("layer entry %s: %w", f.Path, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	// Compress once here (gzip with no name and no time is deterministic), so
	// digesting and writing the layer never compress it again.
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, fmt.Errorf("layer: gzip: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("layer: gzip: %w", err)
	}
	compressed := gz.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(compressed)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// normalize validates files, adds missing parent directories and sorts.
func normalize(files []File) ([]File, error) {
	byPath := make(map[string]File, len(files))
	for _, f := range files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "/" {
			return nil, fmt.Errorf("layer entry %q: path must be absolute, clean and not /", f.Path)
		}
		if _, dup := byPath[f.Path]; dup {
			return nil, fmt.Errorf("layer entry %s: listed twice", f.Path)
		}
		byPath[f.Path] = f
	}
	for _, f := range files {
		for dir := path.Dir(f.Path); dir != "/"; dir = path.Dir(dir) {
			if parent, ok := byPath[dir]; ok {
				if !parent.Mode.IsDir() {
					return nil, fmt.Errorf("layer entry %s: parent %s is not a directory", f.Path, dir)
				}
				continue
			}
			byPath[dir] = Dir(dir, 0o755)
		}
	}
	out := make([]File, 0, len(byPath))
	for _, f := range byPath {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func header(f File, mtime time.Time) (*tar.Header, error) {
	hdr := &tar.Header{
		Name:    strings.TrimPrefix(f.Path, "/"),
		Mode:    int64(f.Mode.Perm()),
		Uid:     f.UID,
		Gid:     f.GID,
		ModTime: mtime,
		Format:  tar.FormatPAX,
	}
	if f.Mode&fs.ModeSetuid != 0 {
		hdr.Mode |= 0o4000
	}
	if f.Mode&fs.ModeSetgid != 0 {
		hdr.Mode |= 0o2000
	}
	if f.Mode&fs.ModeSticky != 0 {
		hdr.Mode |= 0o1000
	}
	switch f.Mode.Type() {
	case 0:
		hdr.Typeflag = tar.TypeReg
		hdr.Size = int64(len(f.Data))
	case fs.ModeDir:
		hdr.Typeflag = tar.TypeDir
		hdr.Name += "/"
	case fs.ModeSymlink:
		if f.Link == "" {
			return nil, fmt.Errorf("layer entry %s: symlink without a target", f.Path)
		}
		hdr.Typeflag = tar.TypeSymlink
		hdr.Linkname = f.Link
	default:
		return nil, fmt.Errorf("layer entry %s: unsupported type %v", f.Path, f.Mode.Type())
	}
	return hdr, nil
}

// Config is what an image runs and for which platform.
type Config struct {
	OS, Architecture, Variant string
	Entrypoint, Cmd, Env      []string
	// User is "uid" or "uid:gid".
	User       string
	WorkingDir string
	Labels     map[string]string
	// Created is the image's creation time (a fixed time keeps the digest
	// reproducible).
	Created time.Time
}

// Image returns an OCI image of layers (bottom first) with cfg.
func Image(cfg Config, layers ...v1.Layer) (v1.Image, error) {
	if cfg.OS == "" || cfg.Architecture == "" {
		return nil, errors.New("image: OS and Architecture are required")
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	adds := make([]mutate.Addendum, 0, len(layers))
	for _, l := range layers {
		adds = append(adds, mutate.Addendum{
			Layer:     l,
			MediaType: types.OCILayer,
			History:   v1.History{Created: v1.Time{Time: cfg.Created}, CreatedBy: "flock imagebuild"},
		})
	}
	img, err := mutate.Append(base, adds...)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = cfg.OS, cfg.Architecture, cfg.Variant
	cf.Created = v1.Time{Time: cfg.Created}
	cf.Config = v1.Config{
		Entrypoint: cfg.Entrypoint,
		Cmd:        cfg.Cmd,
		Env:        cfg.Env,
		User:       cfg.User,
		WorkingDir: cfg.WorkingDir,
		Labels:     cfg.Labels,
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	return img, nil
}

// Index returns an OCI image index of imgs, each entry carrying the
// platform of its image's config, and annotations on the index itself.
func Index(annotations map[string]string, imgs ...v1.Image) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	adds := make([]mutate.IndexAddendum, 0, len(imgs))
	for _, img := range imgs {
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, fmt.Errorf("index: %w", err)
		}
		adds = append(adds, mutate.IndexAddendum{
			Add: img,
			Descriptor: v1.Descriptor{
				MediaType: types.OCIManifestSchema1,
				Platform:  &v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant},
			},
		})
	}
	idx = mutate.AppendManifests(idx, adds...)
	if len(annotations) > 0 {
		var ok bool
		if idx, ok = mutate.Annotations(idx, annotations).(v1.ImageIndex); !ok {
			return nil, errors.New("index: annotations did not return an index")
		}
	}
	return idx, nil
}
