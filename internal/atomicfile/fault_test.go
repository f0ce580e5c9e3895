package atomicfile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// faultFS is the real file system with faults injected: a full disk (writes
// that would grow a file fail with ENOSPC after writing what fits in its
// current size, like a file system without a free block), a crash before the
// n-th mutating step (that step and every later one fail: the process is
// gone), and a record of what was not yet fsynced when a file was renamed.
type faultFS struct {
	full     bool
	crashAt  int // 1-based mutating step that "crashes"; 0 never
	steps    int
	crashed  bool
	dirty    map[string]bool // written since the last fsync, by name
	problems []string        // contract violations seen
	log      []string        // the steps, for messages
}

var errCrash = errors.New("injected crash")

// step counts one mutating step and reports whether it may run.
func (f *faultFS) step(what string) error {
	if f.crashed {
		return errCrash
	}
	f.steps++
	if f.crashAt > 0 && f.steps >= f.crashAt {
		f.crashed = true
		f.log = append(f.log, "CRASH before "+what)
		return errCrash
	}
	f.log = append(f.log, what)
	return nil
}

func (f *faultFS) OpenFile(name string, flag int, perm fs.FileMode) (file, error) {
	if flag&(os.O_CREATE|os.O_TRUNC) != 0 {
		if err := f.step("open " + filepath.Base(name)); err != nil {
			return nil, err
		}
	} else if f.crashed {
		return nil, errCrash
	}
	o, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: o, fs: f}, nil
}

func (f *faultFS) CreateTemp(dir, pattern string) (file, error) {
	if err := f.step("create temp"); err != nil {
		return nil, err
	}
	o, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: o, fs: f}, nil
}

func (f *faultFS) Rename(oldpath, newpath string) error {
	if err := f.step("rename"); err != nil {
		return err
	}
	if f.dirty[oldpath] {
		f.problems = append(f.problems, fmt.Sprintf("renamed %s over %s with writes not fsynced", filepath.Base(oldpath), filepath.Base(newpath)))
	}
	return os.Rename(oldpath, newpath)
}

func (f *faultFS) Remove(name string) error {
	if err := f.step("remove"); err != nil {
		return err
	}
	return os.Remove(name)
}

type faultFile struct {
	*os.File
	fs *faultFS
}

func (f *faultFile) Write(b []byte) (int, error) {
	off, err := f.File.Seek(0, 1)
	if err != nil {
		return 0, err
	}
	n, err := f.WriteAt(b, off)
	if _, serr := f.File.Seek(off+int64(n), 0); serr != nil && err == nil {
		err = serr
	}
	return n, err
}

func (f *faultFile) WriteAt(b []byte, off int64) (int, error) {
	if err := f.fs.step(fmt.Sprintf("write %d@%d %s", len(b), off, filepath.Base(f.Name()))); err != nil {
		return 0, err
	}
	f.fs.dirty[f.Name()] = true
	if f.fs.full {
		fi, err := f.File.Stat()
		if err != nil {
			return 0, err
		}
		if end := off + int64(len(b)); end > fi.Size() {
			fit := max(0, fi.Size()-off)
			n, err := f.File.WriteAt(b[:fit], off)
			if err != nil {
				return n, err
			}
			return n, &fs.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
		}
	}
	return f.File.WriteAt(b, off)
}

func (f *faultFile) Truncate(size int64) error {
	if err := f.fs.step(fmt.Sprintf("truncate %d", size)); err != nil {
		return err
	}
	f.fs.dirty[f.Name()] = true
	return f.File.Truncate(size)
}

func (f *faultFile) Sync() error {
	if err := f.fs.step("fsync " + filepath.Base(f.Name())); err != nil {
		return err
	}
	delete(f.fs.dirty, f.Name())
	return f.File.Sync()
}

func (f *faultFile) Chmod(mode fs.FileMode) error {
	if err := f.fs.step("chmod"); err != nil {
		return err
	}
	return f.File.Chmod(mode)
}

func (f *faultFile) Close() error {
	// Closing cannot be prevented by a crash (the kernel closes), so it is
	// not a step.
	return f.File.Close()
}

// TestDiskFullSeam is the narrow case of TestDiskFull without root: a full
// file system refuses to grow the file; the previous content must stay whole.
func TestDiskFullSeam(t *testing.T) {
	old := "127.0.0.1\tlocalhost\n# BEGIN flock\n10.0.0.1\tweb-0\n# END flock\n10.9.9.9\tforeign\n"
	grown := "127.0.0.1\tlocalhost\n# BEGIN flock\n10.0.0.1\tweb-0\n10.0.0.2\tweb-1\n10.0.0.3\tweb-2\n# END flock\n10.9.9.9\tforeign\n"
	for _, mode := range []Mode{InPlace, Replace, Auto} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "hosts")
			if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
				t.Fatal(err)
			}
			ffs := &faultFS{full: true, dirty: map[string]bool{}}
			_, err := writer{fs: ffs}.write(context.Background(), path, []byte(grown), 0o644, mode)
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("write on a full disk: err = %v, want ENOSPC (steps %q)", err, ffs.log)
			}
			assertFile(t, path, old)
			assertNoTemp(t, dir)
		})
	}
}

// TestCrashBetweenSteps "crashes" the process before each mutating step of a
// write in turn and checks what a restarted peer-finder would find: the old
// or the new content, whole (in place, possibly followed by blank lines: the
// padding), never a truncated or stale-tailed file. It also checks that
// nothing is renamed into place before it is fsynced.
func TestCrashBetweenSteps(t *testing.T) {
	long := "127.0.0.1\tlocalhost\n# BEGIN flock\n10.0.0.1\tweb-0\n10.0.0.2\tweb-1\n10.0.0.3\tweb-2\n# END flock\n10.9.9.9\tforeign\n"
	short := "127.0.0.1\tlocalhost\n# BEGIN flock\n10.0.0.1\tweb-0\n# END flock\n10.9.9.9\tforeign\n"
	for _, mode := range []Mode{InPlace, Replace} {
		for _, dir := range []struct{ name, from, to string }{{"shrink", long, short}, {"grow", short, long}} {
			t.Run(mode.String()+"/"+dir.name, func(t *testing.T) {
				for crashAt := 1; ; crashAt++ {
					tmp := t.TempDir()
					path := filepath.Join(tmp, "hosts")
					if err := os.WriteFile(path, []byte(dir.from), 0o644); err != nil {
						t.Fatal(err)
					}
					ffs := &faultFS{crashAt: crashAt, dirty: map[string]bool{}}
					_, err := writer{fs: ffs}.write(context.Background(), path, []byte(dir.to), 0o644, mode)
					for _, p := range ffs.problems {
						t.Errorf("crash at step %d: %s (steps %q)", crashAt, p, ffs.log)
					}
					got, rerr := os.ReadFile(path)
					if rerr != nil {
						t.Fatalf("crash at step %d: the file is gone: %v", crashAt, rerr)
					}
					if !wholeOf(got, dir.from, mode) && !wholeOf(got, dir.to, mode) {
						t.Fatalf("crash at step %d (%q): file holds %q, want the old or the new content whole", crashAt, ffs.log, got)
					}
					if err == nil && len(ffs.dirty) > 0 {
						t.Errorf("crash at step %d (%q): write reported success with writes not fsynced: %v", crashAt, ffs.log, ffs.dirty)
					}
					if err == nil && string(got) != dir.to {
						t.Fatalf("crash at step %d (%q): write reported success, file holds %q, want %q", crashAt, ffs.log, got, dir.to)
					}
					if !ffs.crashed {
						if err != nil {
							t.Fatalf("write without crash: %v", err)
						}
						if crashAt < 3 {
							t.Fatalf("only %d steps: the fault injection did not see the write (steps %q)", crashAt-1, ffs.log)
						}
						return
					}
					if err != nil && !errors.Is(err, errCrash) {
						t.Fatalf("crash at step %d: err = %v, want the injected crash", crashAt, err)
					}
				}
			})
		}
	}
}

// wholeOf reports whether got is want, followed only by newlines when the
// file was rewritten in place.
func wholeOf(got []byte, want string, mode Mode) bool {
	if mode != InPlace {
		return string(got) == want
	}
	rest, ok := bytes.CutPrefix(got, []byte(want))
	return ok && strings.Trim(string(rest), "\n") == ""
}
