package sink_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

func TestMarshalDocumentGolden(t *testing.T) {
	d := sink.Delivery{
		Set: peer.NewSet(
			peer.Peer{
				FQDN: "zk-1.zk.default.svc.cluster.local", Name: "zk-1", Ordinal: 1,
				IPs: []string{"fd00::2", "10.0.0.2"}, Ready: true, Node: "node-b", Zone: "z2",
				Ports: []peer.Port{{Name: "client", Port: 2181, Protocol: "TCP"}},
			},
			peer.Peer{FQDN: "zk-0.zk.default.svc.cluster.local", Name: "zk-0", Ordinal: 0, IPs: []string{"10.0.0.1"}, Ready: true},
			peer.Peer{FQDN: "zk-2.zk.default.svc.cluster.local", Ordinal: -1},
		),
		Self:       "zk-0.zk.default.svc.cluster.local",
		Generation: 7,
		First:      true,
		Added:      []string{"zk-2.zk.default.svc.cluster.local"},
		Bootstrap:  "form",
	}
	got, err := sink.MarshalDocument(d)
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "document.golden.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("MarshalDocument mismatch (run with -update if intended)\ngot:  %s\nwant: %s", got, want)
	}
}

func TestMarshalDocumentEmptySet(t *testing.T) {
	got, err := sink.MarshalDocument(sink.Delivery{Self: "a", Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"version":1,"self":"a","generation":1,"peers":[]}` + "\n"
	if string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
	var doc sink.Document
	if err := json.Unmarshal(got, &doc); err != nil || doc.Version != sink.DocumentVersion {
		t.Errorf("round trip: %+v, %v", doc, err)
	}
}
