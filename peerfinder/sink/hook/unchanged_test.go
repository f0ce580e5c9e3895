package hook_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
	"github.com/flockd/flock/peerfinder/sink/hook"
)

// A hook runs only when what it receives changes (issue 11 #15): for the
// lines format the names, for json the document (its generation aside).
func TestApplySkipsUnchangedInput(t *testing.T) {
	set := func(ip string, ready bool, names ...string) peer.Set {
		var ps []peer.Peer
		for _, n := range names {
			ps = append(ps, peer.Peer{FQDN: n + ".web.ns.svc.cluster.local", Name: n, IPs: []string{ip}, Ready: ready, Ordinal: -1})
		}
		return peer.NewSet(ps...)
	}
	self := "web-0.web.ns.svc.cluster.local"
	steps := []struct {
		set  peer.Set
		role string
	}{
		{set("10.0.0.1", false, "web-0"), ""},         // first: runs
		{set("10.0.0.1", true, "web-0"), ""},          // ready flipped
		{set("10.0.0.9", true, "web-0"), ""},          // new IP
		{set("10.0.0.9", true, "web-0", "web-1"), ""}, // a new name: runs
		{set("10.0.0.9", true, "web-0", "web-1"), "join"},
	}
	for _, tc := range []struct {
		format hook.Format
		want   int // runs
	}{
		{hook.FormatLines, 3}, // first, new name, role
		{hook.FormatJSON, 5},  // every step changes the document
	} {
		t.Run(string(tc.format), func(t *testing.T) {
			dir := t.TempDir()
			script := filepath.Join(dir, "count.sh")
			runs := filepath.Join(dir, "runs")
			if err := os.WriteFile(script, []byte("#!/bin/sh\ncat >/dev/null\necho run >> "+runs+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			h, err := hook.New(hook.Config{OnChange: []string{script}, Format: tc.format})
			if err != nil {
				t.Fatal(err)
			}
			for i, st := range steps {
				d := sink.Delivery{Set: st.set, Self: self, Generation: uint64(i + 1), First: i == 0, Bootstrap: st.role}
				if err := h.Apply(context.Background(), d); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
			}
			b, _ := os.ReadFile(runs)
			if got := strings.Count(string(b), "run"); got != tc.want {
				t.Errorf("%d hook runs, want %d", got, tc.want)
			}
			// The same content under a new generation: no run.
			last := steps[len(steps)-1]
			if err := h.Apply(context.Background(), sink.Delivery{Set: last.set, Self: self, Generation: 99, Bootstrap: last.role}); err != nil {
				t.Fatal(err)
			}
			b, _ = os.ReadFile(runs)
			if got := strings.Count(string(b), "run"); got != tc.want {
				t.Errorf("after a new generation of the same content: %d hook runs, want %d", got, tc.want)
			}
		})
	}
}

// TestApplyRunsAfterFailureForLastSuccessfulInput: set A succeeds, set B
// makes the hook change the application and then fail, and the set goes back
// to A: the hook runs for A, though A equals the input of the last
// successful run (issue 36 #2: it was skipped, so the application stayed
// configured for B while the delivery counted as a success).
func TestApplyRunsAfterFailureForLastSuccessfulInput(t *testing.T) {
	set := func(names ...string) peer.Set {
		var ps []peer.Peer
		for _, n := range names {
			ps = append(ps, peer.Peer{FQDN: n + ".web.ns.svc.cluster.local", Name: n, Ready: true, Ordinal: -1})
		}
		return peer.NewSet(ps...)
	}
	a, b := set("web-0", "web-1", "web-2"), set("web-0", "web-1", "web-2", "web-3")
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	// Records the size the application is configured for, then fails for 4.
	script := filepath.Join(dir, "on-change.sh")
	body := "#!/bin/sh\nn=$(grep -c .)\necho $n >> " + runs + "\n[ $n -ne 4 ]\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	h, err := hook.New(hook.Config{OnChange: []string{script}, TrailingNewline: true})
	if err != nil {
		t.Fatal(err)
	}
	self := "web-0.web.ns.svc.cluster.local"
	for i, st := range []struct {
		set  peer.Set
		fail bool
	}{{a, false}, {b, true}, {a, false}} {
		err := h.Apply(context.Background(), sink.Delivery{Set: st.set, Self: self, Generation: uint64(i + 1), First: i == 0})
		if (err != nil) != st.fail {
			t.Fatalf("delivery %d: err = %v, want failure %v", i+1, err, st.fail)
		}
	}
	got, _ := os.ReadFile(runs)
	if want := "3\n4\n3\n"; string(got) != want {
		t.Errorf("the hook configured the application for %q, want %q (A again after B failed)", got, want)
	}
}
