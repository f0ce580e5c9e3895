package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/internal/testing/dnstest"
)

// TestMPIHostfile (issue 32 #2): web-1 of three expected members with
// -wait-for-all: nothing is written and the command does not start while
// web-2 has no address; then the MPI hostfile lists the hosts file's names
// in rank order before the command starts.
func TestMPIHostfile(t *testing.T) {
	dns := dnstest.New(t)
	dns.Peers(svc, "web", 2, 80) // web-2 is not there yet
	dir := t.TempDir()
	hosts, hostfile, seen := filepath.Join(dir, "hosts"), filepath.Join(dir, "hostfile"), filepath.Join(dir, "seen")
	p := start(t, "-service=web", "-domain=cluster.local", "-hostname=web-1", "-dns-server="+dns.Addr(), "-poll-period=50ms",
		"-hosts-file="+hosts, "-hosts-expect=web=3", "-wait-for-all",
		"-mpi-hostfile="+hostfile,
		"--", "sh", "-c", `cp "$1" "$2"`, "sh", hostfile, seen)
	await.Until(t, func() bool {
		return strings.Contains(p.stderr.String(), "reason=expected-names-missing") && strings.Contains(p.stderr.String(), "web-2")
	}, "the expected-names gate to be logged")
	for _, f := range []string{hostfile, seen} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s exists (%v) while web-2 has no address", f, err)
		}
	}
	dns.Peers(svc, "web", 3, 80)
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit status %d, want the command's 0\n%s", code, p.stderr)
	}
	if b, _ := os.ReadFile(seen); string(b) != "web-0 slots=1\nweb-1 slots=1\nweb-2 slots=1\n" {
		t.Errorf("MPI hostfile the command saw:\n%s", b)
	}
	// The names resolve through the hosts file written before.
	h, _ := os.ReadFile(hosts)
	if !regexp.MustCompile(`(?m)^10\.0\.0\.2\tweb-2$`).Match(h) {
		t.Errorf("hosts file has no web-2:\n%s", h)
	}
}

// TestJobFileFlagsWithoutWhatTheyNeedExitTwo (issue 32 #2): -mpi-slots=auto
// without the pods source (no CPU request to read), -mpi-slots=0.
func TestJobFileFlagsWithoutWhatTheyNeedExitTwo(t *testing.T) {
	dir := t.TempDir()
	base := []string{"-service=web", "-ns=a", "-domain=x", "-dns-server=127.0.0.1:53"}
	for _, tt := range []struct {
		flag string
		args []string
	}{
		{"-mpi-slots", []string{"-mpi-hostfile=" + filepath.Join(dir, "hostfile"), "-mpi-slots=auto"}},
		{"-mpi-slots", []string{"-mpi-hostfile=" + filepath.Join(dir, "hostfile"), "-mpi-slots=0"}},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, binary, append(base, tt.args...)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(stderr.String(), tt.flag+":") {
				t.Errorf("status %d (%v), stderr %q; want 2 and a message naming %s", code, err, stderr.String(), tt.flag)
			}
		})
	}
	if entries, _ := os.ReadDir(dir); len(entries) > 0 {
		t.Errorf("files written on a usage error: %v", entries)
	}
}
