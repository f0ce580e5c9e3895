package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStaticSourceDryRun runs peer-finder with -source=static: no DNS, no
// API. It delivers the names in -static-file, and again when the file
// changes.
func TestStaticSourceDryRun(t *testing.T) {
	dir := t.TempDir()
	names, doc := filepath.Join(dir, "peers"), filepath.Join(dir, "peers.json")
	write := func(n int) {
		var b strings.Builder
		b.WriteString("# the members\n\n")
		for i := range n {
			fmt.Fprintln(&b, fqdn(i))
		}
		if err := os.WriteFile(names, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(2)
	start(t, "-service=web", "-domain=cluster.local", "-hostname=web-0", "-ns=ns1", "-poll-period=50ms",
		"-source=static", "-static-file="+names, "-json-file="+doc)
	waitFile(t, doc, func(s string) bool { return strings.Contains(s, fqdn(1)) && strings.Count(s, `"fqdn"`) == 2 })
	write(3)
	waitFile(t, doc, func(s string) bool { return strings.Contains(s, fqdn(2)) && strings.Count(s, `"fqdn"`) == 3 })
}

// hostileStatic is a -static-file with web-0 in three spellings, web-1,
// and entries no other source delivers: a space, a command substitution, a
// leading '-', quotes, non-ASCII, another service's member, the service
// itself and a name below a member.
var hostileStatic = strings.Join([]string{
	fqdn(0), strings.ToUpper(fqdn(0)), "Web-0." + svc, fqdn(1),
	"web 2." + svc, "$(touch pwned)." + svc, "-lead." + svc, `"web-3".` + svc,
	"wéb-4." + svc, "db-0.db.ns1.svc.cluster.local", svc, "a." + fqdn(1),
}, "\n") + "\n"

// TestStaticSourceAppliesMemberRules (issue 36 #5): the static source
// follows the member and ordinal rules of DNS: names are lower-cased (so
// web-0 in three spellings is one peer toward -expect), entries that are
// not the service's own RFC 1123 members are dropped with a warning naming
// them and never reach hooks or files, and web-0 has ordinal 0, so it is
// told to form.
func TestStaticSourceAppliesMemberRules(t *testing.T) {
	args := func(t *testing.T, extra ...string) []string {
		names := filepath.Join(t.TempDir(), "peers")
		if err := os.WriteFile(names, []byte(hostileStatic), 0o644); err != nil {
			t.Fatal(err)
		}
		return append([]string{"-service=web", "-domain=cluster.local", "-hostname=web-0", "-ns=ns1", "-poll-period=50ms",
			"-source=static", "-static-file=" + names}, extra...)
	}
	t.Run("delivered", func(t *testing.T) {
		dir, hooks := t.TempDir(), t.TempDir()
		doc := filepath.Join(dir, "peers.json")
		p := start(t, args(t, "-expect=2", "-once", "-json-file="+doc, "-on-start="+recorder(t, hooks, "on-start", false))...)
		if code := p.Wait(t); code != 0 {
			t.Fatalf("exit status %d, want 0", code)
		}
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Bootstrap string `json:"bootstrap"`
			Peers     []struct {
				FQDN    string `json:"fqdn"`
				Ordinal int    `json:"ordinal"`
			} `json:"peers"`
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("%s:0 %s:1", fqdn(0), fqdn(1))
		var peers []string
		for _, p := range got.Peers {
			peers = append(peers, fmt.Sprintf("%s:%d", p.FQDN, p.Ordinal))
		}
		if strings.Join(peers, " ") != want || got.Bootstrap != "form" {
			t.Errorf("JSON file has peers %q, bootstrap %q; want %q, form", peers, got.Bootstrap, want)
		}
		rs := runs(t, hooks)
		if len(rs) != 1 || rs[0].stdin != fqdn(0)+"\n"+fqdn(1) || rs[0].env != "1 "+fqdn(0)+" "+fqdn(1)+"|" {
			t.Errorf("on-start runs %+v; want one with stdin and PEER_FINDER_PEERS_ADDED %s %s", rs, fqdn(0), fqdn(1))
		}
		logs := p.Stderr.String()
		for _, bad := range []string{"web 2", "$(touch pwned)", "-lead", `\"web-3\"`, "wéb-4", "db-0.db.ns1", "a." + fqdn(1)} {
			if !strings.Contains(logs, bad) {
				t.Errorf("no log line names the dropped entry %q", bad)
			}
		}
	})
	t.Run("duplicates do not count toward -expect", func(t *testing.T) {
		p := start(t, args(t, "-expect=3", "-once", "-bootstrap-timeout=1s", "-json-file="+filepath.Join(t.TempDir(), "peers.json"))...)
		if code := p.Wait(t); code != 3 {
			t.Errorf("exit status %d, want 3: only web-0 and web-1 are members, not 3", code)
		}
	})
}
