package atomicfile

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const killWriterEnv = "FLOCK_ATOMICFILE_KILL_WRITER" // "path|mode" in the writer process

// Two contents under one page: a write(2) of either is not torn by SIGKILL.
var (
	killLong  = "127.0.0.1\tlocalhost\n# BEGIN flock\n" + strings.Repeat("10.0.0.1\tweb-0.web.default.svc.cluster.local\n", 40) + "# END flock\n10.9.9.9\tforeign\n"
	killShort = "127.0.0.1\tlocalhost\n# BEGIN flock\n10.0.0.2\tweb-1\n# END flock\n10.9.9.9\tforeign\n"
)

// TestKilledMidWrite SIGKILLs a process that rewrites a file as fast as it
// can, at varying moments, and checks after each kill that the file is
// whole: the long or the short content (in place: followed only by the
// padding newlines), no temporary file left in replace mode beyond the one
// a kill may strand between create and rename, which the next write must
// not trip over.
func TestKilledMidWrite(t *testing.T) {
	if os.Getenv(killWriterEnv) != "" {
		t.Skip("runs in the parent test only")
	}
	for _, mode := range []Mode{InPlace, Replace} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "hosts")
			if err := os.WriteFile(path, []byte(killShort), 0o644); err != nil {
				t.Fatal(err)
			}
			for i := range 20 {
				cmd := exec.Command(os.Args[0], "-test.run=^TestKillWriterProcess$", "-test.count=1")
				cmd.Env = append(os.Environ(), killWriterEnv+"="+path+"|"+mode.String())
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Duration(20+7*i) * time.Millisecond) // when to kill, not a performance bound
				_ = cmd.Process.Signal(syscall.SIGKILL)
				_ = cmd.Wait()
				got, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("kill %d: %v", i, err)
				}
				if !wholeOf(got, killLong, mode) && !wholeOf(got, killShort, mode) {
					t.Fatalf("kill %d: the file holds %d bytes, neither content whole: %q", i, len(got), tail(got))
				}
			}
			// A stranded temporary file does not stop the next write.
			if _, err := Write(path, []byte("x\n"), 0o644, mode); err != nil {
				t.Fatalf("write after the kills: %v", err)
			}
			assertFile(t, path, "x\n")
		})
	}
}

// TestKillWriterProcess is the writer of TestKilledMidWrite: it alternates
// the two contents until killed.
func TestKillWriterProcess(t *testing.T) {
	spec := os.Getenv(killWriterEnv)
	if spec == "" {
		t.Skip("runs only as the writer process of TestKilledMidWrite")
	}
	path, modeName, _ := strings.Cut(spec, "|")
	mode, err := ParseMode(modeName)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second) // the parent kills it long before
	for i := 0; time.Now().Before(deadline); i++ {
		data := killShort
		if i%2 == 0 {
			data = killLong
		}
		if _, err := Write(path, []byte(data), 0o644, mode); err != nil {
			t.Fatal(err)
		}
	}
}
