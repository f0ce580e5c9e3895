package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flockd/flock/internal/testing/await"
)

// A component restarted in a running cluster (a node fault, the API server
// restart) keeps its log: a round that failed across the restart is
// diagnosed from both halves. A new cluster keeps one previous run.
func TestRestartProcKeepsTheLog(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "logs", "comp.log")
	_ = os.WriteFile(logPath, []byte("the cluster before\n"), 0o644)
	s := &State{StateDir: dir}
	p, err := startProc(dir, "comp", "/bin/sh", []string{"-c", "echo first run; exec sleep 60"})
	if err != nil {
		t.Fatal(err)
	}
	s.Procs = append(s.Procs, p)
	waitLog(t, logPath, func(s string) bool { return strings.Contains(s, "first run\n") })
	if err := s.Procs[0].stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.restartProc("comp"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Procs[0].stop(5 * time.Second) })
	got := waitLog(t, logPath, func(s string) bool { return strings.Count(s, "first run\n") == 2 })
	if !strings.Contains(got, "==== comp started again") || strings.Contains(got, "the cluster before") {
		t.Errorf("the log after a restart is %q, want both runs and a marker between", got)
	}
	if prev, _ := os.ReadFile(logPath + ".prev"); string(prev) != "the cluster before\n" {
		t.Errorf(".prev is %q, want the log of the cluster before", prev)
	}
}

// waitLog returns path's content once ok says so.
func waitLog(t *testing.T, path string, ok func(string) bool) string {
	t.Helper()
	var got string
	await.Check(t, func() error {
		b, _ := os.ReadFile(path)
		if got = string(b); !ok(got) {
			return fmt.Errorf("the log is %q", got)
		}
		return nil
	}, "the log %s", path)
	return got
}
