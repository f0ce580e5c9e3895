package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/internal/testing/dnstest"
	"github.com/flockd/flock/peerfinder/sink"
)

// The two answers the DNS server alternates between while peer-finder is
// killed: multi-page files, so a write can be cut in the middle.
var killSizes = [2]int{600, 800}

const killForeign = "127.0.0.1\tlocalhost\n"

// TestSIGKILLedMidWriteAndRestarted SIGKILLs the real peer-finder binary at
// random moments (every other kill the moment a temporary file appears) while it rewrites a large hosts file and JSON file from a
// DNS answer that keeps changing, and restarts it each time (fault matrix:
// killed mid-write, restarted). After every kill both files are whole: the
// old or the new content, in place possibly followed by blank lines. A kill
// between creating a temporary file and renaming it strands the temporary
// file; the restarted peer-finder removes it, so once it delivered a stable
// answer no temporary file is left next to either file.
func TestSIGKILLedMidWriteAndRestarted(t *testing.T) {
	dns := dnstest.New(t)
	dns.Peers(svc, "web", killSizes[0], 80)
	dir := t.TempDir()
	hosts, doc := filepath.Join(dir, "hosts"), filepath.Join(dir, "peers.json")
	if err := os.WriteFile(hosts, []byte(killForeign), 0o644); err != nil {
		t.Fatal(err)
	}
	args := func(mode string) []string {
		return append(common(dns.Addr()), "-hosts-file="+hosts, "-hosts-write-mode="+mode, "-json-file="+doc)
	}

	// The answer flips while peer-finder runs, so it is always writing.
	stop := make(chan struct{})
	flipped := make(chan struct{})
	go func() {
		defer close(flipped)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			dns.Peers(svc, "web", killSizes[i%2], 80)
		}
	}()
	stranded := map[string]bool{}
	const kills = 30
	for i := range kills {
		mode := "replace"
		if i%3 == 2 {
			mode = "in-place"
		}
		p := start(t, args(mode)...)
		if i%2 == 0 {
			time.Sleep(time.Duration(100+rand.IntN(700)) * time.Millisecond) // when to kill, not a performance bound
		} else {
			// Aim at the narrow window: kill as soon as a temporary
			// file exists (or after 5 s without one).
			for deadline := time.Now().Add(5 * time.Second); !strandsNew(dir, stranded) && time.Now().Before(deadline); {
				time.Sleep(100 * time.Microsecond)
			}
		}
		if p.Exited() {
			t.Fatalf("kill %d: peer-finder exited by itself first, status %d", i, p.Status())
		}
		p.Kill() // its process group
		checkWholeHosts(t, i, hosts)
		checkWholeJSON(t, i, doc)
		for _, n := range tempFiles(dir) {
			stranded[n] = true
		}
	}
	close(stop)
	<-flipped
	t.Logf("%d kills stranded %d temporary files", kills, len(stranded))
	if len(stranded) == 0 {
		t.Errorf("no kill stranded a temporary file, so the restart's cleanup went untested (the aimed kills missed every write)")
	}

	// Restarted with a stable answer: it delivers it and leaves no
	// temporary file behind.
	dns.Peers(svc, "web", killSizes[1], 80)
	p := start(t, args("replace")...)
	last := fqdn(killSizes[1] - 1)
	waitFile(t, doc, func(s string) bool { return strings.Contains(s, last) && strings.Count(s, `"fqdn"`) == killSizes[1] })
	waitFile(t, hosts, func(s string) bool { return strings.Contains(s, fmt.Sprintf("web-%d\n", killSizes[1]-1)) })
	// The files may already hold that answer from a killed run: wait for
	// the restarted process itself to have delivered it (both sinks applied).
	peers := strconv.Itoa(killSizes[1])
	await.Until(t, func() bool { return len(p.Find("peers delivered", "generation", "1", "peers", peers)) > 0 }, "the restarted peer-finder to deliver its %s peers", peers)
	checkWholeHosts(t, kills, hosts)
	checkWholeJSON(t, kills, doc)
	if left := tempFiles(dir); len(left) > 0 {
		t.Errorf("temporary files left after the restart delivered: %v", left)
	}
}

// strandsNew reports whether dir holds a temporary file not in seen.
func strandsNew(dir string, seen map[string]bool) bool {
	for _, n := range tempFiles(dir) {
		if !seen[n] {
			return true
		}
	}
	return false
}

// tempFiles lists the files in dir other than the two sinks' files.
func tempFiles(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		if n := e.Name(); n != "hosts" && n != "peers.json" {
			names = append(names, n)
		}
	}
	return names
}

// checkWholeHosts fails unless hosts holds the foreign line, then nothing
// or one complete block of one of the answers, then only blank lines.
func checkWholeHosts(t *testing.T, kill int, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("after kill %d: %v", kill, err)
	}
	s := strings.TrimRight(string(b), "\n") + "\n"
	if s == killForeign {
		return
	}
	rest, ok := strings.CutPrefix(s, killForeign+"# BEGIN flock peer-finder web\n")
	if writer, after, found := strings.Cut(rest, "\n"); found && strings.HasPrefix(writer, "# written by ") {
		rest = after // the writer's line
	}
	body, ok2 := strings.CutSuffix(rest, "# END flock peer-finder web\n")
	if !ok || !ok2 {
		t.Fatalf("after kill %d the hosts file is not whole (%d bytes, ends %q)", kill, len(b), b[max(0, len(b)-60):])
	}
	lines := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
	for j, l := range lines {
		if want := dnstest.IPv4(j) + "\tweb-" + fmt.Sprint(j); l != want {
			t.Fatalf("after kill %d hosts line %d is %q, want %q", kill, j, l, want)
		}
	}
	if n := len(lines); n != killSizes[0] && n != killSizes[1] {
		t.Fatalf("after kill %d the hosts block has %d entries, want %v", kill, n, killSizes)
	}
}

// checkWholeJSON fails unless the JSON file is missing (never written yet)
// or one whole document of one of the answers, possibly followed by
// whitespace.
func checkWholeJSON(t *testing.T, kill int, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return
	}
	if err != nil {
		t.Fatalf("after kill %d: %v", kill, err)
	}
	var d sink.Document
	if err := json.Unmarshal(bytes.TrimRight(b, "\n"), &d); err != nil {
		t.Fatalf("after kill %d the JSON file does not parse (%d bytes, ends %q): %v", kill, len(b), b[max(0, len(b)-60):], err)
	}
	if n := len(d.Peers); n != killSizes[0] && n != killSizes[1] {
		t.Fatalf("after kill %d the JSON file has %d peers, want %v", kill, n, killSizes)
	}
}
