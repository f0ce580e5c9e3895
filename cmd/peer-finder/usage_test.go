package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
			if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(msg, "peer-finder: --: ") || strings.Contains(msg, "---") {
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
			if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(stderr.String(), "-reload-signal") {
				t.Errorf("status %d (%v), stderr %q; want 2 and a message naming -reload-signal", code, err, stderr.String())
			}
		})
	}
}
