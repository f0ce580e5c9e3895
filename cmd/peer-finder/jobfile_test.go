package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flockd/flock/internal/testing/dnstest"
	"github.com/flockd/flock/internal/testing/pfbinary"
)

// TestMPIHostfileAndTorchRendezvous (issue 32 #2): web-1 of three expected
// members with -wait-for-all: nothing is written and the command does not
// start while web-2 has no address; then the MPI hostfile lists the hosts
// file's names in rank order before the command starts, the rendezvous file
// holds torch's variables for rank 1, and the -- command's environment has
// the same values.
func TestMPIHostfileAndTorchRendezvous(t *testing.T) {
	dns := dnstest.New(t)
	dns.Peers(svc, "web", 2, 80) // web-2 is not there yet
	dir := t.TempDir()
	hosts, hostfile, envFile, childEnv := filepath.Join(dir, "hosts"), filepath.Join(dir, "hostfile"), filepath.Join(dir, "rendezvous.env"), filepath.Join(dir, "child.env")
	seen := filepath.Join(dir, "seen")
	p := start(t, "-service=web", "-domain=cluster.local", "-hostname=web-1", "-dns-server="+dns.Addr(), "-poll-period=50ms",
		"-hosts-file="+hosts, "-hosts-expect=web=3", "-wait-for-all",
		"-mpi-hostfile="+hostfile, "-rendezvous=torch", "-rendezvous-file="+envFile,
		"--", "sh", "-c", `cp "$2" "$3" && env > "$1.tmp" && mv "$1.tmp" "$1"`, "sh", childEnv, hostfile, seen)
	awaitNamesMissing(t, p, "web-2")
	for _, f := range []string{hostfile, envFile, childEnv, seen} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s exists (%v) while web-2 has no address", f, err)
		}
	}
	dns.Peers(svc, "web", 3, 80)
	if code := p.Wait(t); code != 0 {
		t.Fatalf("exit status %d, want the command's 0\n%s", code, p.Stderr)
	}
	if b, _ := os.ReadFile(seen); string(b) != "web-0 slots=1\nweb-1 slots=1\nweb-2 slots=1\n" {
		t.Errorf("MPI hostfile the command saw:\n%s", b)
	}
	if b, _ := os.ReadFile(envFile); string(b) != "MASTER_ADDR='web-0'\nMASTER_PORT='29500'\nWORLD_SIZE='3'\nRANK='1'\n" {
		t.Errorf("rendezvous file:\n%s", b)
	}
	b, err := os.ReadFile(childEnv)
	if err != nil {
		t.Fatal(err)
	}
	env := strings.Split(string(b), "\n")
	for _, kv := range []string{"MASTER_ADDR=web-0", "MASTER_PORT=29500", "WORLD_SIZE=3", "RANK=1", "POD_NAMESPACE=ns1"} {
		if !slices.Contains(env, kv) {
			t.Errorf("the command's environment has no %s:\n%s", kv, b)
		}
	}
	// The names resolve through the hosts file written before.
	h, _ := os.ReadFile(hosts)
	if !regexp.MustCompile(`(?m)^10\.0\.0\.2\tweb-2$`).Match(h) {
		t.Errorf("hosts file has no web-2:\n%s", h)
	}
}

// TestJobFileFlagsWithoutWhatTheyNeedExitTwo (issue 32 #2): -mpi-slots=auto
// without the pods source (no CPU request to read), -rendezvous without
// expected names (no fixed world to rank) or without an output.
func TestJobFileFlagsWithoutWhatTheyNeedExitTwo(t *testing.T) {
	dir := t.TempDir()
	base := []string{"-service=web", "-ns=a", "-domain=x", "-dns-server=127.0.0.1:53"}
	for _, tt := range []struct {
		flag string
		args []string
	}{
		{"-mpi-slots", []string{"-mpi-hostfile=" + filepath.Join(dir, "hostfile"), "-mpi-slots=auto"}},
		{"-mpi-slots", []string{"-mpi-hostfile=" + filepath.Join(dir, "hostfile"), "-mpi-slots=0"}},
		{"-rendezvous", []string{"-rendezvous=torch", "-rendezvous-file=" + filepath.Join(dir, "env")}},
		{"-rendezvous", []string{"-rendezvous=tf", "-hosts-expect=worker=2", "-json-file=" + filepath.Join(dir, "j")}},
		{"-rendezvous-file", []string{"-json-file=" + filepath.Join(dir, "j"), "-rendezvous-file=" + filepath.Join(dir, "env")}},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, binary, append(base, tt.args...)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			if code := pfbinary.ExitStatus(cmd.ProcessState); code != 2 || !strings.Contains(stderr.String(), tt.flag+":") {
				t.Errorf("status %d (%v), stderr %q; want 2 and a message naming %s", code, err, stderr.String(), tt.flag)
			}
		})
	}
	if entries, _ := os.ReadDir(dir); len(entries) > 0 {
		t.Errorf("files written on a usage error: %v", entries)
	}
}
