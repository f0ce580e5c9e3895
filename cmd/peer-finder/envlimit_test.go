package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flockd/flock/internal/testing/need"
)

// With a small stack limit the kernel's limit on argv plus environment is
// 128 KiB; a change that fills both peer lists to nearly 64 KiB made every
// run of the hook fail with E2BIG, forever (issue 36 #15). The lists are
// now kept within the real limit: the hook runs, told by
// PEER_FINDER_PEERS_TRUNCATED=1 to read them from the files named by
// PEER_FINDER_PEERS_ADDED_FILE and PEER_FINDER_PEERS_REMOVED_FILE.
func TestHookRunsWithSmallStackLimitAndLongLists(t *testing.T) {
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		need.Unavailable(t, "root", "needs prlimit(1) to lower RLIMIT_STACK")
	}
	const service = "peers-of-a-stateful-set" // long FQDNs: 1,150 fill 62 KB
	member := func(i int) string { return fmt.Sprintf("web-%d.%s.ns1.svc.cluster.local", i, service) }
	dir := t.TempDir()
	names := filepath.Join(dir, "peers")
	write := func(from, to int) { // web-0 and web-from..to-1
		var b strings.Builder
		fmt.Fprintln(&b, member(0))
		for i := from; i < to; i++ {
			fmt.Fprintln(&b, member(i))
		}
		if err := os.WriteFile(names, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const n = 1150
	write(1, n)
	runs := filepath.Join(dir, "runs")
	if err := os.Mkdir(runs, 0o755); err != nil {
		t.Fatal(err)
	}
	hook := filepath.Join(dir, "on-change.sh")
	body := fmt.Sprintf(`#!/bin/sh
f=%q/$PEER_FINDER_GENERATION
if [ "$PEER_FINDER_PEERS_TRUNCATED" = 1 ]; then
	echo "files $(wc -l < "$PEER_FINDER_PEERS_ADDED_FILE") $(wc -l < "$PEER_FINDER_PEERS_REMOVED_FILE")" > "$f.tmp"
else
	echo "env $(echo $PEER_FINDER_PEERS_ADDED | wc -w) $(echo $PEER_FINDER_PEERS_REMOVED | wc -w)" > "$f.tmp"
fi
mv "$f.tmp" "$f"
`, runs)
	if err := os.WriteFile(hook, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	// 512 KiB of stack: the exec limit is max(stack/4, 128 KiB) = 128 KiB.
	// PAD makes the rest of the environment 8 KiB at least, whatever the
	// test's own environment holds.
	p := startProgram(t, prlimit, "--stack=524288", "env", "PAD="+strings.Repeat("x", 8192), binary, "-service="+service, "-domain=cluster.local", "-hostname=web-0", "-ns=ns1",
		"-poll-period=50ms", "-source=static", "-static-file="+names, "-on-change="+hook)
	first := waitFile(t, filepath.Join(runs, "1"), func(s string) bool { return s != "" })
	if want := fmt.Sprintf("env %d 0\n", n); first != want {
		t.Errorf("first run: %q, want %q (the lists fit)", first, want)
	}
	write(n, 2*n-1) // 1,149 added and 1,149 removed: 2 x 62 KB
	second := waitFile(t, filepath.Join(runs, "2"), func(s string) bool { return s != "" })
	if want := fmt.Sprintf("files %d %d\n", n-1, n-1); second != want {
		t.Errorf("second run: %q, want %q (both lists in files)", second, want)
	}
	if recs := p.Find("hook peer lists passed in files"); len(recs) == 0 || recs[0].Level != slog.LevelWarn {
		t.Errorf("no warning that the lists went to files: %v", recs)
	}
}
