package hostsfile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/flockd/flock/internal/atomicfile"
	"github.com/flockd/flock/internal/testing/need"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
	"github.com/flockd/flock/peerfinder/sink/jsonfile"
)

const inMountNS = "FLOCK_HOSTSFILE_MOUNTNS"

// TestSinksOnFullDisk runs the file sinks on a real tmpfs that is full, in a
// private mount namespace (root): the apply fails, the previous file stays
// whole, a set that goes back to the previous one is applied, and once space
// is freed the next apply succeeds (issue 11 #1, the fault-matrix ENOSPC rows
// per file sink; issue 36 #2).
func TestSinksOnFullDisk(t *testing.T) {
	if os.Getenv(inMountNS) != "" {
		t.Skip("already inside the mount namespace")
	}
	need.Root(t, "to create a mount namespace and mount a tmpfs")
	cmd := exec.Command(os.Args[0], "-test.run=^TestInsideSinksOnFullDisk$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), inMountNS+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	switch {
	case bytes.Contains(out, []byte("--- FAIL")):
		t.Fatalf("inside mount namespace:\n%s", out)
	case err != nil:
		t.Skipf("cannot run in a mount namespace: %v\n%s", err, out)
	case bytes.Contains(out, []byte("--- SKIP: TestInsideSinksOnFullDisk")):
		t.Skipf("inside mount namespace:\n%s", out)
	case !bytes.Contains(out, []byte("--- PASS: TestInsideSinksOnFullDisk")):
		t.Fatalf("helper did not run the test:\n%s", out)
	}
}

func TestInsideSinksOnFullDisk(t *testing.T) {
	if os.Getenv(inMountNS) == "" {
		t.Skip("runs only inside TestSinksOnFullDisk's mount namespace")
	}
	big := func(n int) peer.Set {
		var ps []peer.Peer
		for i := range n {
			ps = append(ps, sts(fmt.Sprintf("web-%d", i), i, fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)))
		}
		return peer.NewSet(ps...)
	}
	type applier interface {
		Apply(context.Context, sink.Delivery) error
	}
	for _, tc := range []struct {
		name string
		mk   func(path string) (applier, error)
	}{
		{"hosts-file-in-place", func(p string) (applier, error) { return New(Options{Path: p, WriteMode: atomicfile.InPlace}) }},
		{"hosts-file-replace", func(p string) (applier, error) { return New(Options{Path: p, WriteMode: atomicfile.Replace}) }},
		{"json-file-in-place", func(p string) (applier, error) {
			return jsonfile.New(jsonfile.Options{Path: p, WriteMode: atomicfile.InPlace})
		}},
		{"json-file", func(p string) (applier, error) { return jsonfile.New(jsonfile.Options{Path: p}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=256k,nr_inodes=16"); err != nil {
				t.Skipf("mount tmpfs: %v", err)
			}
			defer syscall.Unmount(dir, syscall.MNT_DETACH)
			path := filepath.Join(dir, "out")
			previous := "127.0.0.1\tlocalhost\n"
			if strings.HasPrefix(tc.name, "json") {
				previous = "" // the JSON file sink replaces nothing but a peer document (issue 36 #7)
			}
			if err := os.WriteFile(path, []byte(previous), 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := tc.mk(path)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := s.Apply(ctx, sink.Delivery{Set: big(2), Self: "web-0.web.default.svc.cluster.local", Generation: 1, First: true}); err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadFile(path)
			filler := filepath.Join(dir, "filler")
			f, err := os.Create(filler)
			if err != nil {
				t.Fatal(err)
			}
			for {
				if _, err := f.Write(bytes.Repeat([]byte{'x'}, 4096)); err != nil {
					break
				}
			}
			f.Close()
			grown := sink.Delivery{Set: big(600), Self: "web-0.web.default.svc.cluster.local", Generation: 2}
			if err := s.Apply(ctx, grown); !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("Apply on a full disk: err = %v, want ENOSPC", err)
			}
			after, _ := os.ReadFile(path)
			if !bytes.Equal(after, before) {
				t.Fatalf("after ENOSPC the file holds %d bytes, want the previous %d whole (ends %q)", len(after), len(before), after[max(0, len(after)-40):])
			}
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if strings.Contains(e.Name(), "tmp") {
					t.Errorf("temporary file left: %s", e.Name())
				}
			}
			// The set goes back to the one on disk (issue 36 #2): applied,
			// still on the full disk, and the file holds it.
			if err := s.Apply(ctx, sink.Delivery{Set: big(2), Self: "web-0.web.default.svc.cluster.local", Generation: 3}); err != nil {
				t.Fatalf("Apply of the set before the failed one: %v", err)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
				t.Fatalf("after the set went back the file holds %d bytes, want the %d of that set", len(after), len(before))
			}
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
			if err := s.Apply(ctx, grown); err != nil {
				t.Fatalf("Apply after space was freed: %v", err)
			}
			if b, _ := os.ReadFile(path); !bytes.Contains(b, []byte("web-599")) {
				t.Errorf("the grown set was not written after space was freed")
			}
		})
	}
}
