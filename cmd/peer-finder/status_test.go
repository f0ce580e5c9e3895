package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/internal/testing/pfbinary"
	"github.com/flockd/flock/peerfinder/status"
)

// TestStatusEndpoint: the real binary serves /status next to /readyz: the
// set its hook got, the generation, the role (web-0 forms by its ordinal)
// and its sink's state.
func TestStatusEndpoint(t *testing.T) {
	names := filepath.Join(t.TempDir(), "peers")
	if err := os.WriteFile(names, []byte(fqdn(0)+"\n"+fqdn(1)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := start(t, "-service=web", "-ns=ns1", "-domain=cluster.local", "-hostname=web-0", "-source=static", "-static-file="+names,
		"-on-change=true", "-metrics-addr=127.0.0.1:0")
	addr := metricsAddr(t, p)
	await.Until(t, func() bool { return len(p.Find("peers delivered")) > 0 }, "a delivery")
	body := httpGet(t, "http://"+addr+status.Path)
	var doc status.Document
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("/status is not a status document: %v\n%s", err, body)
	}
	d := doc.Delivered
	if doc.Version != status.DocumentVersion || doc.Self != fqdn(0) || !doc.Ready || doc.HeldBy != nil || d == nil || d.Generation != 1 || d.Bootstrap != "form" || d.Former != fqdn(0) ||
		!slices.Equal(d.Peers, []string{fqdn(0), fqdn(1)}) || len(doc.Sinks) != 1 || doc.Sinks[0].Name != "hook" || doc.Sinks[0].State != "ok" {
		t.Errorf("/status:\n%s", body)
	}
}

// TestStatusCommandExitStatus: `peer-finder status` refuses a bad command
// line with status 2 naming the flag, and exits 1 when it cannot list the
// pods (no API server here).
func TestStatusCommandExitStatus(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"status"}, 2, "-l: "},
		{[]string{"status", "-l", "app=db", "-o", "yaml"}, 2, "-o: "},
		{[]string{"status", "-l", "app=db", "-timeout=-1s"}, 2, "-timeout: "},
		{[]string{"status", "-nope"}, 2, "-nope"},
		{[]string{"status", "-l", "app=db", "-n", "db", "-master=http://127.0.0.1:1", "-timeout=1s"}, 1, "list pods app=db in db"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, binary, tc.args...)
			cmd.Env = append(os.Environ(), "KUBECONFIG=/nonexistent")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			if code := pfbinary.ExitStatus(cmd.ProcessState); code != tc.code || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("status %d (%v), stderr %q; want %d and %q", code, err, stderr.String(), tc.code, tc.want)
			}
		})
	}
}
