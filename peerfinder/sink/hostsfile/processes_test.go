package hostsfile

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flockd/flock/internal/atomicfile"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
)

const writerEnv = "FLOCK_HOSTSFILE_WRITER" // "path|id|mode" in a writer process

// TestConcurrentWriterProcesses is TestConcurrentWritersOfOneFile with real
// processes, as several peer-finder containers sharing a pod's /etc/hosts:
// each grows its own block step by step; at the end every block is whole.
func TestConcurrentWriterProcesses(t *testing.T) {
	if os.Getenv(writerEnv) != "" {
		t.Skip("runs in the parent test only")
	}
	const writers, steps = 4, 30
	for _, mode := range []atomicfile.Mode{atomicfile.Replace, atomicfile.InPlace} {
		t.Run(mode.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "hosts")
			if err := os.WriteFile(path, []byte("127.0.0.1\tlocalhost\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			ids := func(w int) string { return fmt.Sprintf("proc%d", w) }
			cmds := make([]*exec.Cmd, writers)
			for w := range writers {
				cmd := exec.Command(os.Args[0], "-test.run=^TestWriterProcess$", "-test.count=1")
				cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%s|%s|%d", writerEnv, path, ids(w), mode, steps))
				cmd.WaitDelay = 5 * time.Second
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				cmds[w] = cmd
			}
			for w, cmd := range cmds {
				done := make(chan error, 1)
				go func() { done <- cmd.Wait() }()
				select {
				case err := <-done:
					if err != nil {
						t.Errorf("writer %d: %v", w, err)
					}
				case <-time.After(60 * time.Second):
					_ = cmd.Process.Kill()
					<-done
					t.Fatalf("writer %d did not finish", w)
				}
			}
			want := make([]int64, writers)
			for i := range want {
				want[i] = steps
			}
			if err := checkBlocks(path, ids, want); err != nil {
				t.Errorf("final file: %v", err)
			}
		})
	}
}

// TestWriterProcess is one writer of TestConcurrentWriterProcesses.
func TestWriterProcess(t *testing.T) {
	spec := os.Getenv(writerEnv)
	if spec == "" {
		t.Skip("runs only as a writer process of TestConcurrentWriterProcesses")
	}
	parts := strings.SplitN(spec, "|", 4)
	if len(parts) != 4 {
		t.Fatalf("bad %s %q", writerEnv, spec)
	}
	path, id, modeName := parts[0], parts[1], parts[2]
	steps, err := strconv.Atoi(parts[3])
	if err != nil {
		t.Fatal(err)
	}
	mode, err := atomicfile.ParseMode(modeName)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Path: path, ID: id, WriteMode: mode})
	if err != nil {
		t.Fatal(err)
	}
	var members []peer.Peer
	for n := 1; n <= steps; n++ {
		members = append(members, sts(fmt.Sprintf("%s-%d", id, n-1), n-1, fmt.Sprintf("10.9.0.%d", n)))
		if err := s.Apply(context.Background(), sink.Delivery{Set: peer.NewSet(members...), Generation: uint64(n)}); err != nil {
			t.Fatalf("step %d: %v", n, err)
		}
	}
}
