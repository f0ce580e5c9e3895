package hook

import (
	"bytes"
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
// executable, or is a script whose "#!" interpreter cannot run. A file that
// starts with neither "#!" nor the ELF magic fails with "exec format error"
// (no shell runs it for us), so it is refused too. A file that cannot be read
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
		return nil
	case bytes.HasPrefix(head, []byte("#!")):
		line, _, _ := bytes.Cut(head[2:], []byte("\n"))
		fields := strings.Fields(string(line))
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
