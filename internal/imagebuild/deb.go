package imagebuild

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Deb is a Debian package file.
type Deb struct {
	Name, Version, Arch string
	// Path is the .deb file.
	Path string
}

// String is "name=version" (apt's notation), as recorded in image labels.
func (d Deb) String() string { return d.Name + "=" + d.Version }

// ReadDeb reads a .deb's Package, Version and Architecture fields (dpkg-deb -f).
func ReadDeb(ctx context.Context, file string) (Deb, error) {
	out, err := run(ctx, "", "dpkg-deb", "-f", file, "Package", "Version", "Architecture")
	if err != nil {
		return Deb{}, err
	}
	d := Deb{Path: file}
	for line := range strings.Lines(string(out)) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ": ")
		switch k {
		case "Package":
			d.Name = v
		case "Version":
			d.Version = v
		case "Architecture":
			d.Arch = v
		}
	}
	if d.Name == "" || d.Version == "" || d.Arch == "" {
		return Deb{}, fmt.Errorf("%s: no Package, Version or Architecture field", file)
	}
	return d, nil
}

// Files returns the files the package installs (its data archive, read with
// dpkg-deb --fsys-tarfile), by absolute path. Hard links become copies of
// their target.
func (d Deb) Files(ctx context.Context) (map[string]File, error) {
	out, err := run(ctx, "", "dpkg-deb", "--fsys-tarfile", d.Path)
	if err != nil {
		return nil, err
	}
	return tarFiles(bytes.NewReader(out))
}

func tarFiles(r io.Reader) (map[string]File, error) {
	files := map[string]File{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read package data: %w", err)
		}
		p := path.Clean("/" + hdr.Name)
		if p == "/" {
			continue
		}
		f := File{Path: p, Mode: fs.FileMode(hdr.Mode).Perm(), UID: hdr.Uid, GID: hdr.Gid}
		if hdr.Mode&0o4000 != 0 {
			f.Mode |= fs.ModeSetuid
		}
		if hdr.Mode&0o2000 != 0 {
			f.Mode |= fs.ModeSetgid
		}
		if hdr.Mode&0o1000 != 0 {
			f.Mode |= fs.ModeSticky
		}
		switch hdr.Typeflag {
		case tar.TypeReg:
			if f.Data, err = io.ReadAll(tr); err != nil {
				return nil, fmt.Errorf("read package data %s: %w", p, err)
			}
		case tar.TypeDir:
			f.Mode |= fs.ModeDir
		case tar.TypeSymlink:
			f.Mode |= fs.ModeSymlink
			f.Link = hdr.Linkname
		case tar.TypeLink:
			target, ok := files[path.Clean("/"+hdr.Linkname)]
			if !ok {
				return nil, fmt.Errorf("read package data %s: hard link to unknown %s", p, hdr.Linkname)
			}
			f.Mode, f.Data = target.Mode, target.Data
		default:
			continue
		}
		files[p] = f
	}
}

// Download returns the named packages of arch ("amd64", "arm64", or "all"
// for architecture-independent ones), in the order given, from dir: a cache
// that keeps the .deb files. Missing packages are fetched with
// `apt-get download`; when that fails, arch is added as a dpkg foreign
// architecture if it is not one yet, the package lists are updated, and the
// download is tried once more (both need root). Nothing is pinned: a
// package's first download decides its version until the cache is cleared.
func Download(ctx context.Context, dir, arch string, names ...string) ([]Deb, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("deb cache: %w", err)
	}
	var missing []string
	for _, n := range names {
		if p, err := cached(dir, n, arch); err != nil {
			return nil, err
		} else if p == "" {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		if err := fetch(ctx, dir, arch, missing); err != nil {
			if err := addArch(ctx, arch); err != nil {
				return nil, err
			}
			if _, err := run(ctx, "", "apt-get", "update", "-q"); err != nil {
				return nil, err
			}
			if err := fetch(ctx, dir, arch, missing); err != nil {
				return nil, err
			}
		}
	}
	debs := make([]Deb, 0, len(names))
	for _, n := range names {
		p, err := cached(dir, n, arch)
		if err != nil {
			return nil, err
		}
		if p == "" {
			return nil, fmt.Errorf("apt-get download %s:%s left no .deb in %s", n, arch, dir)
		}
		d, err := ReadDeb(ctx, p)
		if err != nil {
			return nil, err
		}
		if d.Name != n || d.Arch != arch {
			return nil, fmt.Errorf("%s: holds %s:%s, want %s:%s", p, d.Name, d.Arch, n, arch)
		}
		debs = append(debs, d)
	}
	return debs, nil
}

// cached returns the newest-named .deb of name for arch in dir, or "".
func cached(dir, name, arch string) (string, error) {
	m, err := filepath.Glob(filepath.Join(dir, name+"_*_"+arch+".deb"))
	if err != nil || len(m) == 0 {
		return "", err
	}
	slices.Sort(m)
	return m[len(m)-1], nil
}

// fetch downloads names into a temporary directory beside dir's files and
// moves each .deb into dir, so the cache never holds a partial download.
func fetch(ctx context.Context, dir, arch string, names []string) error {
	tmp, err := os.MkdirTemp(dir, ".download-")
	if err != nil {
		return fmt.Errorf("deb cache: %w", err)
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	args := []string{"download", "-q", "-o", "APT::Sandbox::User=root"}
	for _, n := range names {
		if arch == "all" {
			args = append(args, n)
		} else {
			args = append(args, n+":"+arch)
		}
	}
	if _, err := run(ctx, tmp, "apt-get", args...); err != nil {
		return err
	}
	got, err := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if err != nil {
		return err
	}
	for _, p := range got {
		if err := os.Rename(p, filepath.Join(dir, filepath.Base(p))); err != nil {
			return fmt.Errorf("deb cache: %w", err)
		}
	}
	return nil
}

// addArch adds arch as a dpkg foreign architecture unless it is the native
// one or already added.
func addArch(ctx context.Context, arch string) error {
	if arch == "all" {
		return nil
	}
	native, err := run(ctx, "", "dpkg", "--print-architecture")
	if err != nil {
		return err
	}
	foreign, err := run(ctx, "", "dpkg", "--print-foreign-architectures")
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(native)) == arch || slices.Contains(strings.Fields(string(foreign)), arch) {
		return nil
	}
	_, err = run(ctx, "", "dpkg", "--add-architecture", arch)
	return err
}

// run runs a command in dir and returns its stdout; its stderr is in the error.
func run(ctx context.Context, dir, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
