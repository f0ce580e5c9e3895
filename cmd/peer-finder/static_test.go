package main

import (
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
