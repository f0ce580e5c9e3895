package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flockd/flock/internal/testing/pfbinary"
)

// TestUsageErrorsFoundBuildingSinksExitTwo: some bad command lines are only
// found when the sinks are built, after the flags parsed (an empty command
// after "--" next to a file sink). They are usage errors all the same:
// status 2 and a message naming "--".
func TestUsageErrorsFoundBuildingSinksExitTwo(t *testing.T) {
	dir := t.TempDir()
	base := []string{"-service=web", "-ns=a", "-domain=x", "-dns-server=127.0.0.1:53"}
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"empty command with a JSON file", []string{"-json-file=" + filepath.Join(dir, "peers.json"), "--", ""}},
		{"empty command with a hosts file", []string{"-hosts-file=" + filepath.Join(dir, "hosts"), "--", ""}},
		{"empty command with arguments", []string{"-json-file=" + filepath.Join(dir, "peers.json"), "--", "", "-x"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(binary, append(base, tt.args...)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			msg := stderr.String()
			if code := pfbinary.ExitStatus(cmd.ProcessState); code != 2 || !strings.Contains(msg, "peer-finder: --: ") || strings.Contains(msg, "---") {
				t.Errorf("status %d (%v), stderr %q; want 2 and a message naming --", code, err, msg)
			}
		})
	}
}

// TestReloadSignalThatCannotBeCaughtExitsTwo (issue 36 #13): a
// -reload-signal the command cannot catch, or whose default action stops it
// (SIGSTOP froze the application after the first change), is a usage error.
func TestReloadSignalThatCannotBeCaughtExitsTwo(t *testing.T) {
	base := []string{"-service=web", "-ns=a", "-domain=x", "-dns-server=127.0.0.1:53"}
	for _, sig := range []string{"SIGSTOP", "SIGKILL", "9", "TSTP", "21", "TTOU", "65", "0"} {
		t.Run(sig, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, binary, append(base, "-reload-signal="+sig, "--", "true")...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			if code := pfbinary.ExitStatus(cmd.ProcessState); code != 2 || !strings.Contains(stderr.String(), "-reload-signal") {
				t.Errorf("status %d (%v), stderr %q; want 2 and a message naming -reload-signal", code, err, stderr.String())
			}
		})
	}
}

// TestFileOutputsNamingOneFileExitTwo (issue 36 #12): -hosts-file and
// -json-file naming one file (after cleaning the path) made it the JSON
// document, the hosts file's other lines (localhost) lost. It is a usage
// error naming both flags, and the file is left alone.
func TestFileOutputsNamingOneFileExitTwo(t *testing.T) {
	dir := t.TempDir()
	hosts, names := filepath.Join(dir, "hosts"), filepath.Join(dir, "peers")
	const content = "127.0.0.1 localhost\n"
	if err := os.WriteFile(names, []byte(fqdn(0)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	base := []string{"-service=web", "-ns=ns1", "-domain=cluster.local", "-hostname=web-0", "-source=static", "-static-file=" + names}
	for _, tt := range []struct {
		name       string
		hosts, doc string
	}{
		{"same path", hosts, hosts},
		{"same path after cleaning", hosts, dir + "//./sub/../hosts"}, // sub exists
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.WriteFile(hosts, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, binary, append(base, "-hosts-file="+tt.hosts, "-json-file="+tt.doc, "-once")...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			msg := stderr.String()
			if code := pfbinary.ExitStatus(cmd.ProcessState); code != 2 || !strings.Contains(msg, "-hosts-file") || !strings.Contains(msg, "-json-file") {
				t.Errorf("status %d (%v), stderr %q; want 2 and a message naming -hosts-file and -json-file", code, err, msg)
			}
			if b, err := os.ReadFile(hosts); err != nil || string(b) != content {
				t.Errorf("hosts file now %q (%v); want it untouched, %q", b, err, content)
			}
		})
	}
}
