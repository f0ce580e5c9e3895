package hostsfile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
)

// TestRunRestoresARewrittenFile: when someone rewrites the file from
// scratch (the kubelet does so to a pod's /etc/hosts at every container
// start), Run puts the newest block back without a new delivery, and keeps
// the other writer's lines.
func TestRunRestoresARewrittenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	s, err := New(Options{Path: path, ID: "web", KeepInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	for gen, ip := range []string{"10.0.0.1", "10.0.0.2"} {
		if err := s.Apply(ctx, sink.Delivery{Set: peer.NewSet(sts("web-0", 0, ip)), Generation: uint64(gen + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	// Run starts after the Applies: a check between them finds the older
	// block and restores the newest, and a restore that read the file
	// before the rename below would land after it and drop the other
	// writer's lines (it takes no lock: the race of any writer that does
	// not, not what this test is about).
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	kubelet := "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n"
	// Replaced in one step: an in-place rewrite could be read half-done by
	// Run's 5 ms check, whose restore would then race the rest of it.
	if err := os.WriteFile(path+".new", []byte(kubelet), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	await.Check(t, func() error {
		b, _ := os.ReadFile(path)
		got := string(b)
		if !strings.Contains(got, "10.0.0.2\tweb-0") {
			return fmt.Errorf("the file is\n%s", got)
		}
		if !strings.HasPrefix(got, kubelet) || strings.Contains(got, "10.0.0.1") {
			t.Fatalf("restored file lost the other writer's lines or holds an older block:\n%s", got)
		}
		return nil
	}, "the block to be restored")
}
