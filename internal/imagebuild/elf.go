package imagebuild

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// ELF is what an executable needs from the system.
type ELF struct {
	Machine elf.Machine
	// Interp is the program interpreter (PT_INTERP); "" for a static
	// executable.
	Interp string
	// Needed are the DT_NEEDED sonames.
	Needed []string
}

// ReadELF reads the machine, interpreter and needed libraries of an ELF file.
func ReadELF(data []byte) (ELF, error) {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return ELF{}, fmt.Errorf("elf: %w", err)
	}
	defer func() { _ = f.Close() }()
	e := ELF{Machine: f.Machine}
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return ELF{}, fmt.Errorf("elf: interpreter: %w", err)
		}
		e.Interp = strings.TrimRight(string(b), "\x00")
	}
	if e.Needed, err = f.ImportedLibraries(); err != nil {
		return ELF{}, fmt.Errorf("elf: needed libraries: %w", err)
	}
	return e, nil
}

// ELFHead is what the start of an executable tells: the ELF header and the
// program headers, which linkers place right after it.
type ELFHead struct {
	Machine elf.Machine
	// Interp: there is a PT_INTERP (a dynamic loader runs the program).
	Interp bool
	// Dynamic: there is a PT_DYNAMIC (dynamically linked, or static-pie).
	Dynamic bool
}

// ReadELFHead reads an ELF file's head from a prefix of it (64 KiB is
// plenty), so a large binary need not be read whole. Only 64-bit
// little-endian files (amd64, arm64) are supported.
func ReadELFHead(prefix []byte) (ELFHead, error) {
	if len(prefix) < 64 || string(prefix[:4]) != elf.ELFMAG {
		return ELFHead{}, errors.New("elf: not an ELF file")
	}
	if elf.Class(prefix[elf.EI_CLASS]) != elf.ELFCLASS64 || elf.Data(prefix[elf.EI_DATA]) != elf.ELFDATA2LSB {
		return ELFHead{}, errors.New("elf: not 64-bit little-endian")
	}
	var h elf.Header64
	if err := binary.Read(bytes.NewReader(prefix), binary.LittleEndian, &h); err != nil {
		return ELFHead{}, fmt.Errorf("elf: header: %w", err)
	}
	head := ELFHead{Machine: elf.Machine(h.Machine)}
	for i := range int(h.Phnum) {
		off := int(h.Phoff) + i*int(h.Phentsize)
		var p elf.Prog64
		if off < 0 || off+binary.Size(p) > len(prefix) {
			return ELFHead{}, fmt.Errorf("elf: program header %d lies beyond the first %d bytes", i, len(prefix))
		}
		if err := binary.Read(bytes.NewReader(prefix[off:]), binary.LittleEndian, &p); err != nil {
			return ELFHead{}, fmt.Errorf("elf: program header %d: %w", i, err)
		}
		switch elf.ProgType(p.Type) {
		case elf.PT_INTERP:
			head.Interp = true
		case elf.PT_DYNAMIC:
			head.Dynamic = true
		}
	}
	return head, nil
}

// WithLibraries adds to files what the dynamic ELF executables at paths in
// files need to run, taken from from (a library package's files): their
// interpreter and, transitively, every DT_NEEDED library found in libDirs,
// each with the symlinks that lead to it. It returns the added entries. A
// library that cannot be found is an error.
func WithLibraries(files map[string]File, from map[string]File, libDirs []string, paths ...string) ([]File, error) {
	var added []File
	have := func(p string) bool { _, ok := files[p]; return ok }
	add := func(f File) {
		if !have(f.Path) {
			files[f.Path] = f
			added = append(added, f)
		}
	}
	// addPath adds p and, for a symlink, what it points at; it returns the
	// regular file p resolves to.
	addPath := func(p string) (File, error) {
		for range 16 {
			f, ok := from[p]
			if !ok {
				return File{}, fmt.Errorf("%s: not in the library package", p)
			}
			add(f)
			if f.Mode.Type() == fs.ModeSymlink {
				t := f.Link
				if !path.IsAbs(t) {
					t = path.Join(path.Dir(p), t)
				}
				p = path.Clean(t)
				continue
			}
			return f, nil
		}
		return File{}, fmt.Errorf("%s: too many symlinks", p)
	}
	queue := append([]string(nil), paths...)
	done := map[string]bool{}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if done[p] {
			continue
		}
		done[p] = true
		f, ok := files[p]
		if !ok {
			return nil, fmt.Errorf("%s: not in the image", p)
		}
		e, err := ReadELF(f.Data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if e.Interp != "" {
			lf, err := addPath(e.Interp)
			if err != nil {
				return nil, fmt.Errorf("%s needs its interpreter: %w", p, err)
			}
			queue = append(queue, lf.Path)
		}
		for _, so := range e.Needed {
			var found bool
			for _, dir := range libDirs {
				if _, ok := from[path.Join(dir, so)]; !ok {
					continue
				}
				lf, err := addPath(path.Join(dir, so))
				if err != nil {
					return nil, fmt.Errorf("%s needs %s: %w", p, so, err)
				}
				queue = append(queue, lf.Path)
				found = true
				break
			}
			if !found {
				return nil, fmt.Errorf("%s needs %s: not in %v", p, so, libDirs)
			}
		}
	}
	return added, nil
}
