package hostsfile

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/flockd/flock/internal/testing/logtest"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
)

func TestSinkApply(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	user := "127.0.0.1\tlocalhost\n# mine\n"
	if err := os.WriteFile(path, []byte(user), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := logtest.New()
	s, err := New(Options{
		Path: path, ID: "train", NameTemplate: "{{.Role}}-{{.Index}}",
		Expected: []string{"ps-0", "worker-0", "worker-1"},
		Logger:   logs.Logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	set := peer.NewSet(job("ps", "0", "10.0.0.1"), job("worker", "0", "10.0.0.2"), job("BAD", "0", "10.0.0.3"))
	if got, want := s.Missing(set), []string{"worker-1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Missing = %q, want %q", got, want)
	}
	if err := s.Apply(ctx, sink.Delivery{Set: set, Generation: 1, First: true}); err != nil {
		t.Fatal(err)
	}
	want := user + "# BEGIN flock peer-finder train\n10.0.0.1\tps-0\n10.0.0.2\tworker-0\n# no address yet: worker-1\n# END flock peer-finder train\n"
	assertContent(t, path, want)
	if warns := logs.AtLevel(slog.LevelWarn); len(warns) != 1 || warns[0].Attrs["count"] != "1" {
		t.Errorf("warnings %v, want one for one invalid name", warns)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode changed to %v", fi.Mode().Perm())
	}

	// Same set: the file is not rewritten (same inode, "unchanged" logged).
	ino := inodeOf(t, path)
	logs.Reset()
	if err := s.Apply(ctx, sink.Delivery{Set: set, Generation: 2}); err != nil {
		t.Fatal(err)
	}
	if applied := logs.Find("hosts file applied"); inodeOf(t, path) != ino || len(applied) != 1 || applied[0].Attrs["result"] != "unchanged" {
		t.Errorf("unchanged set rewrote the file: %v", applied)
	}

	// worker-1 appears, worker-0 is retried with a new IP.
	set = peer.NewSet(job("ps", "0", "10.0.0.1"), job("worker", "0", "10.0.0.7"), job("worker", "1", "10.0.0.8"))
	if m := s.Missing(set); len(m) != 0 {
		t.Errorf("Missing = %q, want none", m)
	}
	if err := s.Apply(ctx, sink.Delivery{Set: set, Generation: 3}); err != nil {
		t.Fatal(err)
	}
	assertContent(t, path, user+"# BEGIN flock peer-finder train\n10.0.0.1\tps-0\n10.0.0.7\tworker-0\n10.0.0.8\tworker-1\n# END flock peer-finder train\n")

	// A user edits the file by hand around our block: kept.
	b, _ := os.ReadFile(path)
	edited := "# top\n" + string(b) + "10.1.1.1\tafter\n"
	if err := os.WriteFile(path, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	set = peer.NewSet(job("ps", "0", "10.0.0.1"))
	if err := s.Apply(ctx, sink.Delivery{Set: set, Generation: 4}); err != nil {
		t.Fatal(err)
	}
	assertContent(t, path, "# top\n"+user+"# BEGIN flock peer-finder train\n10.0.0.1\tps-0\n# no address yet: worker-0\n# no address yet: worker-1\n# END flock peer-finder train\n10.1.1.1\tafter\n")
}

func TestSinkApplyErrors(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Error("New without path succeeded")
	}
	if _, err := New(Options{Path: "x", Expected: []string{"Bad"}}); err == nil {
		t.Error("New with an invalid expected name succeeded")
	}
	path := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(path, []byte("# BEGIN flock peer-finder\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Apply(context.Background(), sink.Delivery{Set: peer.NewSet(sts("web-0", 0, "10.0.0.1"))})
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Apply on a file with an open block: err = %v, want one naming the file", err)
	}
	assertContent(t, path, "# BEGIN flock peer-finder\n")
}

func assertContent(t *testing.T, path, want string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s:\n--- got\n%s--- want\n%s", path, got, want)
	}
}

func inodeOf(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// With WaitForAll the writer does not fail on an incomplete set: waiting
// for the expected names is membership's gate (Missing feeds it), not a
// failed Apply.
func TestWaitForAll(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	s, err := New(Options{Path: path, NameTemplate: "{{.Role}}-{{.Index}}", Expected: []string{"ps-0", "worker-0"}, WaitForAll: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	partial := peer.NewSet(job("ps", "0", "10.0.0.1"))
	if got := s.Missing(partial); !reflect.DeepEqual(got, []string{"worker-0"}) {
		t.Fatalf("Missing(partial) = %v, want [worker-0]", got)
	}
	if err := s.Apply(ctx, sink.Delivery{Set: partial, Generation: 1, First: true}); err != nil {
		t.Fatalf("Apply(partial) = %v, want nil (the gate is membership's)", err)
	}
	assertContent(t, path, "# BEGIN flock peer-finder\n10.0.0.1\tps-0\n# no address yet: worker-0\n# END flock peer-finder\n")
	full := peer.NewSet(job("ps", "0", "10.0.0.1"), job("worker", "0", "10.0.0.2"))
	if got := s.Missing(full); len(got) != 0 {
		t.Fatalf("Missing(full) = %v", got)
	}
	if !s.HoldsBack() {
		t.Error("HoldsBack() = false with WaitForAll")
	}
}
