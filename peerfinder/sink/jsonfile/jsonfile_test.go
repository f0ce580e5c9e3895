package jsonfile

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
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

// TestApplyRefusesFileThatIsNotADocument: the sink replaces only a file
// that it could have written, a peer document (of any version) or an empty
// file; anything else at the path (a hosts file given to -json-file, a
// shadow-like file, other JSON) is left whole and Apply fails naming it
// (issue 36 #7 and #12: -json-file at an existing hosts file replaced it
// silently).
func TestApplyRefusesFileThatIsNotADocument(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		refused       bool
	}{
		{"hosts file", "127.0.0.1\tlocalhost\n10.0.0.1\tdb-0\n", true},
		{"shadow-like", "root:$6$salt$hash:19000:0:99999:7:::\n", true},
		{"other JSON object", `{"previous": true}` + "\n", true},
		{"JSON array", `[{"version":1}]`, true},
		{"document without peers", `{"version":1,"self":"web-0.web.ns.svc.cluster.local"}`, true},
		{"empty", "", false},
		{"blank lines (an in-place rewrite's padding)", "\n\n", false},
		{"document of another version", `{"version":99,"self":"web-0.web.ns.svc.cluster.local","generation":4,"peers":[]}`, false},
		{"document padded in place", `{"version":1,"self":"web-0.web.ns.svc.cluster.local","generation":4,"peers":[]}` + "\n\n\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "peers.json")
			if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := New(Options{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			err = s.Apply(context.Background(), delivery(1, "10.0.0.1"))
			b, _ := os.ReadFile(path)
			if !tc.refused {
				if err != nil || read(t, path).Generation != 1 {
					t.Errorf("Apply over %q = %v, file %q; want the document written", tc.content, err, b)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "not a peer document") {
				t.Errorf("Apply over %q = %v; want an error naming %s as not a peer document", tc.content, err, path)
			}
			if string(b) != tc.content {
				t.Errorf("the file now holds %q, want %q untouched", b, tc.content)
			}
		})
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
