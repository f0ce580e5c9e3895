package hostsfile

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/flockd/flock/internal/testing/logtest"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
)

// TestTwoWritersOfOneBlockBackOff: two sinks with the same -hosts-id on one
// file, each with a different set, as two peer-finders configured alike
// beside one shared file are. Their keep loops are driven check by check
// over 10 simulated minutes (a check every 10 ms of the clock passed in,
// the file really written): each writer warns once, naming the other as
// the block records it, backs off instead of restoring its block at every
// check, shows the conflict in Warnings (/readyz) and the metric; once the
// other writer stops, the survivor's block stays and the conflict ends.
func TestTwoWritersOfOneBlockBackOff(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(path, []byte("127.0.0.1\tlocalhost\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	type writer struct {
		s    *Sink
		k    keeper
		logs *logtest.Recorder
		m    *Metrics
	}
	start := func(name, ip string) *writer {
		w := &writer{logs: logtest.New(), m: NewMetrics(prometheus.NewRegistry())}
		var err error
		w.s, err = New(Options{Path: path, ID: "web", Writer: name + " pid 7", KeepInterval: 10 * time.Millisecond,
			Metrics: w.m, Logger: w.logs.Logger()})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.s.Apply(ctx, sink.Delivery{Set: peer.NewSet(sts("web-0", 0, ip)), Generation: 1}); err != nil {
			t.Fatal(err)
		}
		return w
	}
	a, b := start("pod-a", "10.0.0.1"), start("pod-b", "10.0.0.2")
	now := time.Now()
	var last string
	rewrites := 0
	tick := func(ws ...*writer) {
		now = now.Add(10 * time.Millisecond)
		for _, w := range ws {
			w.s.keep(ctx, &w.k, now)
			got, _ := os.ReadFile(path)
			if string(got) != last {
				rewrites++
				last = string(got)
			}
		}
	}
	for range 60_000 { // 10 minutes
		tick(a, b)
	}
	t.Logf("%d rewrites in 10 minutes", rewrites)
	// Unbounded, each check would restore: 60,000 rewrites per writer.
	// Backing off to at most a minute: 10 to 20 each, plus the first dozen.
	if rewrites > 100 {
		t.Errorf("the two writers rewrote the file %d times in 10 minutes, want a bounded backoff (at most 100)", rewrites)
	}
	for _, c := range []struct {
		w     *writer
		other string
	}{{a, "pod-b pid 7"}, {b, "pod-a pid 7"}} {
		if warns := c.w.logs.AtLevel(slog.LevelWarn); len(warns) != 1 || warns[0].Attrs["other_writer"] != c.other {
			t.Errorf("want one warning naming %q, got %v", c.other, warns)
		}
		if ws := c.w.s.Warnings(); len(ws) != 1 || !strings.Contains(ws[0], c.other) {
			t.Errorf("Warnings() = %q, want one naming %q", ws, c.other)
		}
		if n := testutil.ToFloat64(c.w.m.Conflicts); n < 1 {
			t.Errorf("flock_hosts_block_conflicts_total = %v, want at least 1", n)
		}
	}

	// b stops: a's block is back within a backoff, and the conflict ends.
	for range 30_000 {
		tick(a)
	}
	if got, _ := os.ReadFile(path); !strings.Contains(string(got), "10.0.0.1\tweb-0") || !strings.Contains(string(got), "# written by pod-a pid 7\n") {
		t.Errorf("after the other writer stopped, the file is:\n%s", got)
	}
	if ws := a.s.Warnings(); len(ws) != 0 {
		t.Errorf("Warnings() = %q after the other writer stopped, want none", ws)
	}
}

// TestTwoWritersOfOneSetDoNotConflict: two writers of one block with the
// same set (two identical pods) are no conflict: neither restores the
// other's copy, whose writer line differs, nor warns.
func TestTwoWritersOfOneSetDoNotConflict(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	ctx := context.Background()
	logs := logtest.New()
	var ws []*Sink
	for _, name := range []string{"pod-a", "pod-b"} {
		s, err := New(Options{Path: path, ID: "web", Writer: name, Logger: logs.Logger()})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Apply(ctx, sink.Delivery{Set: peer.NewSet(sts("web-0", 0, "10.0.0.1")), Generation: 1}); err != nil {
			t.Fatal(err)
		}
		ws = append(ws, s)
	}
	want, _ := os.ReadFile(path)
	ks := make([]keeper, len(ws))
	now := time.Now()
	for range 100 {
		now = now.Add(time.Second)
		for i, s := range ws {
			s.keep(ctx, &ks[i], now)
		}
	}
	assertContent(t, path, string(want))
	if warns, restored := logs.AtLevel(slog.LevelWarn), logs.Find("hosts file: block restored after the file was rewritten by someone else"); len(warns)+len(restored) != 0 {
		t.Errorf("writers of one set conflicted: %v %v", warns, restored)
	}
}
