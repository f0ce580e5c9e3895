package hostsfile

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
)

// BenchmarkRender5000 plans and renders the managed block of a 5,000-peer
// set into a kubelet-style /etc/hosts.
func BenchmarkRender5000(b *testing.B) {
	ps := make([]peer.Peer, 5000)
	for i := range ps {
		ps[i] = peer.Peer{FQDN: fmt.Sprintf("web-%d.web.ns.svc.cluster.local", i), Name: fmt.Sprintf("web-%d", i),
			IPs: []string{fmt.Sprintf("10.%d.%d.%d", i>>16&0xff, i>>8&0xff, i&0xff)}, Ready: true, Ordinal: i}
	}
	set := peer.NewSet(ps...)
	namer, err := NewNamer("", nil, "")
	if err != nil {
		b.Fatal(err)
	}
	current := []byte("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n10.244.0.5\tweb-0.web.ns.svc.cluster.local\tweb-0\n")
	b.ReportAllocs()
	for b.Loop() {
		plan := MakePlan(set, namer, 0, nil)
		if len(plan.Entries) != 5000 {
			b.Fatalf("%d entries", len(plan.Entries))
		}
		if _, err := Render(current, "web", Block("web", plan)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkKeepUnchanged56MB is one check of Run's keep loop on a 56 MB
// hosts file that holds the block and did not change since the last check:
// what Run costs every KeepInterval, forever (issue 36: re-reading the
// whole file took 4-8 % of a CPU at the default second).
func BenchmarkKeepUnchanged56MB(b *testing.B) {
	path := filepath.Join(b.TempDir(), "hosts")
	var big bytes.Buffer
	for i := 0; big.Len() < 56<<20; i++ {
		fmt.Fprintf(&big, "10.%d.%d.%d\thost-%d.example.com host-%d\n", i>>16&0xff, i>>8&0xff, i&0xff, i, i)
	}
	if err := os.WriteFile(path, big.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	s, err := New(Options{Path: path, ID: "web"})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Apply(ctx, sink.Delivery{Set: peer.NewSet(sts("web-0", 0, "10.0.0.1")), Generation: 1}); err != nil {
		b.Fatal(err)
	}
	before, _ := os.Stat(path)
	// The steady state: the file last changed longer ago than racyWindow.
	now := time.Now().Add(2 * racyWindow)
	var k keeper
	s.keep(ctx, &k, now) // the first check reads the file
	b.ReportAllocs()
	for b.Loop() {
		s.keep(ctx, &k, now)
	}
	if after, _ := os.Stat(path); !after.ModTime().Equal(before.ModTime()) {
		b.Fatal("the check rewrote the file")
	}
}
