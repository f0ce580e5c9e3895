package hook_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flockd/flock/peerfinder/sink/hook"
)

// Peer lists too long for the environment are not silently unset (issue 36
// #15): a change of 1,800 peers left PEER_FINDER_PEERS_ADDED unset, so a
// hook looping over it did nothing. Now PEER_FINDER_PEERS_TRUNCATED=1 says
// both lists are in the files named by PEER_FINDER_PEERS_ADDED_FILE and
// PEER_FINDER_PEERS_REMOVED_FILE (one FQDN per line), removed after the
// run, and a warning is logged.
func TestApplyLongPeerListsGoToFiles(t *testing.T) {
	out := filepath.Join(t.TempDir(), "env")
	h, logs := newHook(t, hook.Config{OnChange: helper("env-to-file", out)})
	d := delivery(1800, false) // 1,800 added FQDNs: 70 KB
	d.Removed = []string{"gone-0.zk.default.svc.cluster.local", "gone-1.zk.default.svc.cluster.local"}
	if err := apply(t, h, context.Background(), d); err != nil {
		t.Fatal(err)
	}
	var got map[string]string
	if err := json.Unmarshal(readFile(t, out), &got); err != nil {
		t.Fatal(err)
	}
	if got[hook.EnvPeersTruncated] != "1" {
		t.Fatalf("%s = %q, want 1; environment %.300v", hook.EnvPeersTruncated, got[hook.EnvPeersTruncated], got)
	}
	for _, k := range []string{hook.EnvPeersAdded, hook.EnvPeersRemoved} {
		if v, ok := got[k]; ok {
			t.Errorf("%s set (%d bytes) though the lists went to files", k, len(v))
		}
	}
	for k, want := range map[string][]string{hook.EnvPeersAddedFile: d.Added, hook.EnvPeersRemovedFile: d.Removed} {
		if c := got[k+":content"]; c != strings.Join(want, "\n")+"\n" {
			t.Errorf("%s holds %d lines, want the %d FQDNs, one per line", k, strings.Count(c, "\n"), len(want))
		}
		if _, err := os.Stat(got[k]); !os.IsNotExist(err) {
			t.Errorf("%s %s still there after the run (%v)", k, got[k], err)
		}
	}
	warned := false
	for _, r := range logs.records(t) {
		warned = warned || r["msg"] == "hook peer lists passed in files" && r["level"] == "WARN"
	}
	if !warned {
		t.Errorf("no warning that the lists went to files")
	}

	// Short lists stay in the environment, with no file.
	d = delivery(3, false)
	d.Removed = nil
	if err := apply(t, h, context.Background(), d); err != nil {
		t.Fatal(err)
	}
	got = nil
	if err := json.Unmarshal(readFile(t, out), &got); err != nil {
		t.Fatal(err)
	}
	if _, ok := got[hook.EnvPeersTruncated]; ok || got[hook.EnvPeersAdded] != strings.Join(d.Added, " ") || got[hook.EnvPeersAddedFile] != "" {
		t.Errorf("short lists: environment %v, want them inline and no truncation", got)
	}
}
