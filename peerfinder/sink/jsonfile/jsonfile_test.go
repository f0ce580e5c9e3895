package jsonfile

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
)

func delivery(gen uint64, ips ...string) sink.Delivery {
	var ps []peer.Peer
	for i, ip := range ips {
		name := []string{"web-0", "web-1", "web-2"}[i]
		ps = append(ps, peer.Peer{FQDN: name + ".web.ns.svc.cluster.local", Name: name, IPs: []string{ip}, Ready: true, Ordinal: i})
	}
	return sink.Delivery{Set: peer.NewSet(ps...), Self: "web-0.web.ns.svc.cluster.local", Generation: gen}
}

func TestApply(t *testing.T) {
	path := filepath.Join(t.TempDir(), "peers.json")
	s, err := New(Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Apply(ctx, delivery(1, "10.0.0.1", "10.0.0.2")); err != nil {
		t.Fatal(err)
	}
	doc := read(t, path)
	if doc.Version != sink.DocumentVersion || doc.Generation != 1 || doc.Self != "web-0.web.ns.svc.cluster.local" || len(doc.Peers) != 2 || doc.Peers[1].IPs[0] != "10.0.0.2" {
		t.Fatalf("document = %+v", doc)
	}
	ino := inode(t, path)

	// Same content under a new generation (e.g. after a restart): untouched.
	if err := s.Apply(ctx, delivery(7, "10.0.0.1", "10.0.0.2")); err != nil {
		t.Fatal(err)
	}
	if inode(t, path) != ino || read(t, path).Generation != 1 {
		t.Errorf("same content rewritten (generation %d)", read(t, path).Generation)
	}

	// New content: replaced, new generation.
	if err := s.Apply(ctx, delivery(8, "10.0.0.1", "10.0.0.9", "10.0.0.3")); err != nil {
		t.Fatal(err)
	}
	if doc := read(t, path); doc.Generation != 8 || len(doc.Peers) != 3 || doc.Peers[1].IPs[0] != "10.0.0.9" {
		t.Errorf("after change: %+v", doc)
	}
	if inode(t, path) == ino {
		t.Error("changed content written in place; want an atomic replace")
	}
}

func TestSameContent(t *testing.T) {
	enc := func(d sink.Delivery) []byte {
		b, err := sink.MarshalDocument(d)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name     string
		old, new []byte
		want     bool
	}{
		{"identical", enc(delivery(1, "10.0.0.1")), enc(delivery(1, "10.0.0.1")), true},
		{"generation only", enc(delivery(1, "10.0.0.1")), enc(delivery(5, "10.0.0.1")), true},
		{"ip changed", enc(delivery(1, "10.0.0.1")), enc(delivery(1, "10.0.0.2")), false},
		{"peer added", enc(delivery(1, "10.0.0.1")), enc(delivery(2, "10.0.0.1", "10.0.0.2")), false},
		{"empty file", nil, enc(delivery(1, "10.0.0.1")), false},
		{"garbage", []byte("{not json"), enc(delivery(1, "10.0.0.1")), false},
		{"other version", []byte(`{"version":99,"self":"web-0.web.ns.svc.cluster.local","generation":1,"peers":[]}`), enc(delivery(1)), false},
	} {
		if got := SameContent(tc.old, tc.new); got != tc.want {
			t.Errorf("%s: SameContent = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func read(t *testing.T, path string) sink.Document {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d sink.Document
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return d
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}
