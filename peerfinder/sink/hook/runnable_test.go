package hook

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flockd/flock/internal/testing/elftest"
)

// Scripts and binaries that the kernel refuses with ENOENT although the
// file exists are refused at start (issue 36 #20): a #! line ending in
// "\r" (a script saved with CRLF line ends names the interpreter
// "/bin/sh\r") and an ELF whose loader (PT_INTERP) is missing failed every
// run with "fork/exec <existing file>: no such file or directory".
func TestRunnableRefusesWhatTheKernelCannotLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, body []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, body, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	crlf := write("crlf.sh", []byte("#!/bin/sh\r\necho hi\r\n"))
	crlfArg := write("crlf-arg.sh", []byte("#!/bin/sh -e\r\necho hi\r\n"))
	good := write("good.sh", []byte("#!/bin/sh\necho hi\n"))
	goodArg := write("good-arg.sh", []byte("#!/bin/sh -e\necho hi\n"))
	noLoader := write("no-loader", elftest.WithInterp(t, "/bin/true", "/nonexistent/ld-flock.so"))
	for _, tc := range []struct {
		path string
		want string // "" for runnable
	}{
		{crlf, `carriage return`},
		{crlfArg, `carriage return`}, // sh gets the option "-e\r" and refuses it
		{good, ""},
		{goodArg, ""},
		{noLoader, "/nonexistent/ld-flock.so"},
		{"/bin/true", ""},
	} {
		err := Runnable([]string{tc.path})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("Runnable(%s) = %v, want nil", filepath.Base(tc.path), err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("Runnable(%s) = %v, want an error with %q", filepath.Base(tc.path), err, tc.want)
		}
	}
}
