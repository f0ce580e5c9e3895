package hook

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/google/shlex"
)

// ParseCommand turns a hook flag value into an argv.
//
// When the trimmed value names an existing file that is not a directory, the
// argv is just that path, so a script whose name contains spaces runs as
// upstream peer-finder ran it; a bare file name gets a "./" prefix so that
// the file in the working directory runs rather than one found on $PATH.
// Otherwise the value is split by POSIX shell word rules: quotes and
// backslashes are removed, an unquoted # starts a comment, and nothing is
// expanded (no variables, globs or pipes; no shell runs the command). This
// lets -on-start='/hooks/zk.sh --id 1' pass arguments, and makes the value
// "/work-dir/on-start.sh" (with literal quotes, as Kubernetes' ZooKeeper
// manifest passes it through args:) run /work-dir/on-start.sh.
//
// An empty value, one with only a comment, or one with an unclosed quote is
// an error.
func ParseCommand(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("empty hook command")
	}
	if fi, err := os.Stat(s); err == nil && !fi.IsDir() {
		if !strings.Contains(s, "/") {
			s = "./" + s
		}
		return []string{s}, nil
	}
	argv, err := shlex.Split(s)
	if err != nil {
		return nil, fmt.Errorf("hook command %q: %w", s, err)
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, fmt.Errorf("hook command %q: no program to run", s)
	}
	return argv, nil
}

// Runnable reports why argv can never run, or nil: argv[0] is not found
// (looked up in PATH when it has no slash), is a directory or not
// executable, is a script whose "#!" interpreter cannot run or whose "#!"
// line ends in a carriage return (CRLF line ends: the kernel looks for
// "/bin/sh\r"), or is an ELF binary whose loader (PT_INTERP, e.g.
// /lib/ld-musl-x86_64.so.1 in a glibc image) is missing. A file that starts
// with neither "#!" nor the ELF magic fails with "exec format error" (no
// shell runs it for us), so it is refused too. A file that cannot be read
// is given the benefit of the doubt.
func Runnable(argv []string) error {
	if len(argv) == 0 || argv[0] == "" {
		return errors.New("no command")
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return err
	}
	return runnableFile(path, 0)
}

// runnableFile checks the format of the executable at path; depth counts
// interpreters that are scripts themselves (Linux allows 4).
func runnableFile(path string, depth int) error {
	if depth > 4 {
		return fmt.Errorf("%s: too many levels of #! interpreters", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil // e.g. execute-only: the kernel may still run it
	}
	defer f.Close()
	head := make([]byte, 256)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	switch {
	case bytes.HasPrefix(head, []byte("\x7fELF")):
		interp, err := elfInterp(f)
		if err != nil || interp == "" {
			return nil // not ours to judge: the kernel decides
		}
		if _, err := os.Stat(interp); err != nil {
			return fmt.Errorf("%s: its ELF loader (program interpreter) %s: %w; the binary was built for another system (glibc vs musl?)", path, interp, err)
		}
		return nil
	case bytes.HasPrefix(head, []byte("#!")):
		line, _, _ := bytes.Cut(head[2:], []byte("\n"))
		if bytes.HasSuffix(line, []byte("\r")) {
			return fmt.Errorf("%s: its #! line ends in a carriage return (CRLF line ends), so the kernel looks for the interpreter %q; convert it to LF line ends (dos2unix, or sed -i 's/\\r$//')",
				path, strings.TrimLeft(string(line), " \t"))
		}
		// The kernel splits the #! line at spaces and tabs only.
		fields := strings.FieldsFunc(string(line), func(r rune) bool { return r == ' ' || r == '\t' })
		if len(fields) == 0 {
			return fmt.Errorf("%s: empty #! line", path)
		}
		interp := fields[0]
		fi, err := os.Stat(interp)
		switch {
		case err != nil:
			return fmt.Errorf("%s: interpreter %s: %w", path, interp, err)
		case fi.IsDir() || fi.Mode().Perm()&0o111 == 0:
			return fmt.Errorf("%s: interpreter %s is not executable", path, interp)
		}
		return runnableFile(interp, depth+1)
	}
	return fmt.Errorf("%s: no #! interpreter line and not a binary, so it cannot be executed (exec format error); add e.g. #!/bin/sh as its first line", path)
}

// elfInterp returns the PT_INTERP path of the ELF file f, "" for a static
// binary. It reads the ELF header and program headers itself (debug/elf
// would link DWARF and compression code into peer-finder for this).
func elfInterp(f io.ReaderAt) (string, error) {
	var ident [64]byte
	if _, err := f.ReadAt(ident[:], 0); err != nil {
		return "", err
	}
	var bo binary.ByteOrder
	switch ident[5] { // EI_DATA
	case 1:
		bo = binary.LittleEndian
	case 2:
		bo = binary.BigEndian
	default:
		return "", errors.New("unknown ELF byte order")
	}
	var phoff uint64
	var phentsize, phnum uint16
	switch ident[4] { // EI_CLASS
	case 1:
		phoff = uint64(bo.Uint32(ident[0x1c:]))
		phentsize, phnum = bo.Uint16(ident[0x2a:]), bo.Uint16(ident[0x2c:])
	case 2:
		phoff = bo.Uint64(ident[0x20:])
		phentsize, phnum = bo.Uint16(ident[0x36:]), bo.Uint16(ident[0x38:])
	default:
		return "", errors.New("unknown ELF class")
	}
	const ptInterp = 3
	ph := make([]byte, phentsize)
	for i := range uint64(phnum) {
		if _, err := f.ReadAt(ph, int64(phoff+i*uint64(phentsize))); err != nil {
			return "", err
		}
		if len(ph) < 4 || bo.Uint32(ph) != ptInterp {
			continue
		}
		var off, size uint64
		if ident[4] == 1 && len(ph) >= 20 {
			off, size = uint64(bo.Uint32(ph[4:])), uint64(bo.Uint32(ph[16:]))
		} else if len(ph) >= 40 {
			off, size = bo.Uint64(ph[8:]), bo.Uint64(ph[32:])
		}
		if size == 0 || size > 4096 {
			return "", errors.New("bad PT_INTERP size")
		}
		b := make([]byte, size)
		if _, err := f.ReadAt(b, int64(off)); err != nil {
			return "", err
		}
		return string(bytes.TrimRight(b, "\x00")), nil
	}
	return "", nil
}
