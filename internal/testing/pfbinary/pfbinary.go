// Package pfbinary builds the peer-finder binary for tests that run it as a
// real process. Build it once per test binary, in TestMain:
//
//	var binary string
//
//	func TestMain(m *testing.M) {
//		path, cleanup := pfbinary.Build()
//		binary = path
//		code := m.Run()
//		cleanup()
//		os.Exit(code)
//	}
package pfbinary

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// Package is the import path of peer-finder's main package.
const Package = "github.com/flockd/flock/cmd/peer-finder"

// Build builds peer-finder with the race detector into a new temporary
// directory and returns the binary's path and a function that removes the
// directory. It is meant for TestMain, where there is no *testing.T: when
// the build fails it prints the compiler's output and exits the process
// with status 1.
func Build() (path string, cleanup func()) {
	dir, err := os.MkdirTemp("", "peer-finder-test")
	if err != nil {
		panic(err)
	}
	path = filepath.Join(dir, "peer-finder")
	out, err := exec.Command("go", "build", "-race", "-o", path, Package).CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build peer-finder: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	return path, func() { os.RemoveAll(dir) }
}

// ExitStatus is a finished process's status as a shell reports it: its
// exit code, or 128+N when signal N killed it. The one rule of every test
// that runs peer-finder as a process.
func ExitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
