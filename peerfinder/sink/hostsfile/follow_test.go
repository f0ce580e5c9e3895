package hostsfile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/flockd/flock/internal/ordinal"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
)

func TestReadBlockRoundTrip(t *testing.T) {
	plan := Plan{
		Entries: []Entry{{IP: "10.0.0.1", Name: "ps-0", Aliases: []string{"ps-0.train"}}, {IP: "fd00::2", Name: "worker-0"}},
		Pending: []string{"worker-1"},
	}
	content, err := Render([]byte("127.0.0.1\tlocalhost\n"), "train", Block("train", plan))
	if err != nil {
		t.Fatal(err)
	}
	got, found, err := ReadBlock(content, "train")
	if err != nil || !found {
		t.Fatalf("ReadBlock = %v, %v, %v", got, found, err)
	}
	if len(got) != 2 || got[0].Name != "ps-0" || !slices.Equal(got[0].Aliases, []string{"ps-0.train"}) || got[1].IP != "fd00::2" {
		t.Errorf("ReadBlock = %+v, want the plan's entries", got)
	}
	if _, found, err := ReadBlock(content, "other"); found || err != nil {
		t.Errorf("block of another id: found %v, err %v", found, err)
	}
	for name, bad := range map[string]string{
		"unterminated": "# BEGIN flock peer-finder train\n10.0.0.1\tps-0\n",
		"bad address":  "# BEGIN flock peer-finder train\nnope\tps-0\n# END flock peer-finder train\n",
		"no name":      "# BEGIN flock peer-finder train\n10.0.0.1\n# END flock peer-finder train\n",
		"two blocks":   "# BEGIN flock peer-finder train\n# END flock peer-finder train\n# BEGIN flock peer-finder train\n# END flock peer-finder train\n",
	} {
		if _, _, err := ReadBlock([]byte(bad), "train"); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestFollowerWaitsForTheWritersFile: the follower never writes, and with
// WaitForAll it succeeds only once the file someone else writes is complete.
func TestFollowerWaitsForTheWritersFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	opts := Options{Path: path, ID: "train", NameTemplate: `{{index .Labels "role"}}-{{.Index}}`,
		Expected: []string{"ps-0", "worker-0"}, WaitForAll: true}
	writer, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	follower := func() sink.Sink {
		s, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		return s.Follower()
	}()
	member := func(role, index, ip string) peer.Peer {
		return peer.Peer{FQDN: role + "-" + index + ".train.ns.svc.cluster.local", IPs: []string{ip}, Ordinal: -1,
			Labels: map[string]string{"role": role, ordinal.JobCompletionIndexLabel: index}}
	}
	full := sink.Delivery{Set: peer.NewSet(member("ps", "0", "10.0.0.1"), member("worker", "0", "10.0.0.2")), Generation: 1}
	ctx := context.Background()

	var inc *IncompleteError
	if err := follower.Apply(ctx, full); !sink.IsPending(err) || !errors.As(err, &inc) || !slices.Equal(inc.Missing, []string{"ps-0", "worker-0"}) {
		t.Fatalf("follower before any write: %v, want pending with both names missing", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("follower wrote the file: %v", err)
	}
	half := sink.Delivery{Set: peer.NewSet(member("ps", "0", "10.0.0.1")), Generation: 1}
	if err := writer.Apply(ctx, half); err != nil {
		t.Fatalf("writer with half the set: %v", err)
	}
	if err := follower.Apply(ctx, full); !errors.As(err, &inc) || !slices.Equal(inc.Missing, []string{"worker-0"}) {
		t.Fatalf("follower with a half-written file: %v, want worker-0 missing", err)
	}
	if err := writer.Apply(ctx, full); err != nil {
		t.Fatal(err)
	}
	if err := follower.Apply(ctx, full); err != nil {
		t.Fatalf("follower with a complete file: %v", err)
	}
	// Once complete, a later incomplete file (a retried pod) does not stall it.
	if err := writer.Apply(ctx, half); err != nil {
		t.Fatal(err)
	}
	if err := follower.Apply(ctx, half); err != nil {
		t.Errorf("follower after completion: %v", err)
	}
}
