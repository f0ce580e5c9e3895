package hostsfile

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flockd/flock/internal/testing/logtest"
	"github.com/flockd/flock/internal/testing/need"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
)

// TestApplyWarnsOnceOnNameCollision: a name template that gives several
// live peers one host name writes one line for it; the others are named in
// one warning per change, not one per Apply and not only at info level. A
// retried pod shadowing its terminating predecessor is no collision.
func TestApplyWarnsOnceOnNameCollision(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	logs := logtest.New()
	s, err := New(Options{Path: path, NameTemplate: "{{.Role}}", Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	colliding := peer.NewSet(job("ps", "0", "10.0.0.1"), job("worker", "0", "10.0.0.2"), job("worker", "1", "10.0.0.3"))
	for gen := uint64(1); gen <= 3; gen++ { // the same set again: a retry, or another sink's change
		if err := s.Apply(ctx, sink.Delivery{Set: colliding, Generation: gen}); err != nil {
			t.Fatal(err)
		}
	}
	warns := collisions(logs)
	if len(warns) != 1 || !strings.Contains(warns[0], `worker`) || !strings.Contains(warns[0], job("worker", "1").Key()) {
		t.Fatalf("want one warning naming the host name worker and the peer left out, got %d:\n%s", len(warns), logs)
	}
	assertContent(t, path, "# BEGIN flock peer-finder\n10.0.0.1\tps\n10.0.0.2\tworker\n# END flock peer-finder\n")

	// Another collision: warned again, once.
	logs.Reset()
	other := peer.NewSet(job("ps", "0", "10.0.0.1"), job("ps", "1", "10.0.0.4"), job("worker", "0", "10.0.0.2"))
	for gen := uint64(4); gen <= 5; gen++ {
		if err := s.Apply(ctx, sink.Delivery{Set: other, Generation: gen}); err != nil {
			t.Fatal(err)
		}
	}
	if warns := collisions(logs); len(warns) != 1 || !strings.Contains(warns[0], job("ps", "1").Key()) {
		t.Errorf("want one warning for the new collision, got %d:\n%s", len(warns), logs)
	}

	// A retried pod whose predecessor is still terminating: no warning.
	logs.Reset()
	old := job("worker", "0", "10.0.0.2")
	old.Terminating, old.Ready = true, false
	newer := job("worker", "0", "10.0.0.9")
	newer.FQDN, newer.Name = "worker-0-new.jobs.default.svc.cluster.local", "worker-0-new"
	if err := s.Apply(ctx, sink.Delivery{Set: peer.NewSet(old, newer), Generation: 6}); err != nil {
		t.Fatal(err)
	}
	if warns := logs.AtLevel(slog.LevelWarn); len(warns) != 0 {
		t.Errorf("a terminating predecessor shadowed by its retry was warned about: %v", warns)
	}
}

// TestApplyWarnsOncePerChangeOnPeersWithoutFamily: with -ip-family=ipv4,
// IPv6-only peers get no line; they are named in one warning per change
// instead of an empty block without a word.
func TestApplyWarnsOncePerChangeOnPeersWithoutFamily(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	logs := logtest.New()
	s, err := New(Options{Path: path, Family: IPv4, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	v6only := peer.NewSet(sts("web-0", 0, "fd00::1"), sts("web-1", 1, "fd00::2"))
	for gen := uint64(1); gen <= 2; gen++ {
		if err := s.Apply(ctx, sink.Delivery{Set: v6only, Generation: gen}); err != nil {
			t.Fatal(err)
		}
	}
	warns := logs.AtLevel(slog.LevelWarn)
	if len(warns) != 1 || warns[0].Attrs["ip_family"] != "ipv4" ||
		!strings.Contains(warns[0].Attrs["peers"], sts("web-0", 0).Key()) || !strings.Contains(warns[0].Attrs["peers"], sts("web-1", 1).Key()) {
		t.Fatalf("want one warning naming ipv4 and both IPv6-only peers, got %v", warns)
	}
	assertContent(t, path, "# BEGIN flock peer-finder\n# END flock peer-finder\n")

	// web-0 gets an IPv4 address: web-1 is named again, once.
	logs.Reset()
	mixed := peer.NewSet(sts("web-0", 0, "10.0.0.1", "fd00::1"), sts("web-1", 1, "fd00::2"))
	for gen := uint64(3); gen <= 4; gen++ {
		if err := s.Apply(ctx, sink.Delivery{Set: mixed, Generation: gen}); err != nil {
			t.Fatal(err)
		}
	}
	warns = logs.AtLevel(slog.LevelWarn)
	if len(warns) != 1 || warns[0].Attrs["peers"] != "["+sts("web-1", 1).Key()+"]" {
		t.Errorf("want one warning naming web-1 only, got %v", warns)
	}
	// A peer without any address yet is pending, not of the wrong family.
	logs.Reset()
	if err := s.Apply(ctx, sink.Delivery{Set: peer.NewSet(sts("web-0", 0, "10.0.0.1"), sts("web-2", 2)), Generation: 5}); err != nil {
		t.Fatal(err)
	}
	if warns := logs.AtLevel(slog.LevelWarn); len(warns) != 0 {
		t.Errorf("a peer without addresses was warned about: %v", warns)
	}
}

// TestIndentedStaleBlockIsReplaced: a block whose markers are indented (a
// hand edit, a config tool) is still our block: it is replaced, not left
// in place with a second block appended after it, where its stale address
// would come first for the resolver.
func TestIndentedStaleBlockIsReplaced(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	stale := "127.0.0.1\tlocalhost\n  # BEGIN flock peer-finder web\n\t10.9.9.9\tweb-0\n \t# END flock peer-finder web  \n10.1.1.1\tafter\n"
	if err := os.WriteFile(path, []byte(stale), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Path: path, ID: "web"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(context.Background(), sink.Delivery{Set: peer.NewSet(sts("web-0", 0, "10.0.0.1")), Generation: 1}); err != nil {
		t.Fatal(err)
	}
	assertContent(t, path, "127.0.0.1\tlocalhost\n# BEGIN flock peer-finder web\n10.0.0.1\tweb-0\n# END flock peer-finder web\n10.1.1.1\tafter\n")
	b, _ := os.ReadFile(path)
	if entries, found, err := ReadBlock([]byte(stale), "web"); err != nil || !found || len(entries) != 1 || entries[0].IP != "10.9.9.9" {
		t.Errorf("ReadBlock(indented) = %v, %v, %v; want the stale entry", entries, found, err)
	}
	if got := resolve(t, b, "web-0"); got != "10.0.0.1" {
		t.Errorf("the resolver gives web-0 %q, want 10.0.0.1:\n%s", got, b)
	}
}

// resolve asks glibc's resolver (getent, through nsswitch's files) for
// name with content bind-mounted over /etc/hosts in a private mount
// namespace, and returns the first address.
func resolve(t *testing.T, content []byte, name string) string {
	t.Helper()
	need.Root(t, "to bind-mount a hosts file over /etc/hosts in a private mount namespace")
	for _, tool := range []string{"unshare", "getent", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			need.Unavailable(t, "root", fmt.Sprintf("%s not found", tool))
		}
	}
	path := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
		`mount --bind "$1" /etc/hosts && exec getent hosts "$2"`, "sh", path, name).CombinedOutput()
	if err != nil {
		t.Fatalf("getent hosts %s: %v: %s", name, err, out)
	}
	addr, _, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	return addr
}

// collisions returns the collisions attribute of each warning logged.
func collisions(logs *logtest.Recorder) []string {
	var out []string
	for _, r := range logs.AtLevel(slog.LevelWarn) {
		out = append(out, r.Attrs["collisions"])
	}
	return out
}
