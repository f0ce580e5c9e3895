package imagebuild

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/flockd/flock/internal/atomicfile"
)

// Annotation keys of the layout's index.json entry that name the image.
// containerd's importer reads the first; the OCI spec defines the second.
const (
	AnnotationContainerdName = "io.containerd.image.name"
	AnnotationRefName        = "org.opencontainers.image.ref.name"
)

// WriteArchive writes idx as an OCI archive at path: a tar of an OCI image
// layout whose index.json has one entry, idx, annotated with ref (e.g.
// "ghcr.io/flockd/peer-finder:v0.1.0") under both AnnotationContainerdName
// and AnnotationRefName. Entries are sorted and carry mtime. The file is
// replaced atomically and left alone when its bytes would not change.
func WriteArchive(path, ref string, idx v1.ImageIndex, mtime time.Time) error {
	return WriteArchiveNames(path, []string{ref}, idx, mtime)
}

// WriteArchiveNames is WriteArchive with several names for one image: one
// index.json entry per ref, in order, all pointing at idx (containerd's
// importer creates an image for each; the blobs are stored once).
func WriteArchiveNames(path string, refs []string, idx v1.ImageIndex, mtime time.Time) error {
	if len(refs) == 0 {
		return fmt.Errorf("archive %s: no image name", path)
	}
	dir, err := os.MkdirTemp("", "imagebuild-layout-")
	if err != nil {
		return fmt.Errorf("archive %s: %w", path, err)
	}
	defer func() { _ = os.RemoveAll(dir) }()

	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("archive %s: layout: %w", path, err)
	}
	for _, ref := range refs {
		err = p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
			AnnotationContainerdName: ref,
			AnnotationRefName:        ref,
		}))
		if err != nil {
			return fmt.Errorf("archive %s: layout: %w", path, err)
		}
	}
	data, err := tarDir(dir, mtime)
	if err != nil {
		return fmt.Errorf("archive %s: %w", path, err)
	}
	if err := atomicfile.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("archive %s: %w", path, err)
	}
	return nil
}

// tarDir tars the tree under dir (names relative to it, lexical order,
// root-owned, 0755 directories and 0644 files, all at mtime).
func tarDir(dir string, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime, Format: tar.FormatPAX}
		if d.IsDir() {
			hdr.Typeflag, hdr.Mode, hdr.Name = tar.TypeDir, 0o755, hdr.Name+"/"
			return tw.WriteHeader(hdr)
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("layout entry %s: not a regular file", rel)
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, st.Size()
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// OpenArchive unpacks the OCI archive at path (as WriteArchive writes it)
// into dir and opens the layout there, with the manifest of its index.json.
func OpenArchive(path, dir string) (layout.Path, v1.IndexManifest, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", v1.IndexManifest{}, fmt.Errorf("open archive: %w", err)
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", v1.IndexManifest{}, fmt.Errorf("read archive %s: %w", path, err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(p, filepath.Clean(dir)+string(filepath.Separator)) {
			return "", v1.IndexManifest{}, fmt.Errorf("archive %s: entry %q outside the layout", path, h.Name)
		}
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return "", v1.IndexManifest{}, fmt.Errorf("unpack archive: %w", err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", v1.IndexManifest{}, fmt.Errorf("unpack archive: %w", err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return "", v1.IndexManifest{}, fmt.Errorf("read archive %s: %w", path, err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return "", v1.IndexManifest{}, fmt.Errorf("unpack archive: %w", err)
		}
	}
	lp, err := layout.FromPath(dir)
	if err != nil {
		return "", v1.IndexManifest{}, fmt.Errorf("archive %s: %w", path, err)
	}
	im, err := lp.ImageIndex()
	if err != nil {
		return "", v1.IndexManifest{}, fmt.Errorf("archive %s: %w", path, err)
	}
	m, err := im.IndexManifest()
	if err != nil {
		return "", v1.IndexManifest{}, fmt.Errorf("archive %s: %w", path, err)
	}
	return lp, *m, nil
}
