package jobfile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flockd/flock/internal/ordinal"
	"github.com/flockd/flock/internal/testing/golden"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
	"github.com/flockd/flock/peerfinder/sink/hostsfile"
)

// member is a batch-job pod with role and Job completion index labels and
// a CPU request.
func member(role, index string, milli int64, ips ...string) peer.Peer {
	return peer.Peer{
		FQDN: role + "-" + index + "-x7k2p.train.default.svc.cluster.local", Name: role + "-" + index + "-x7k2p",
		Pod: role + "-" + index + "-x7k2p", IPs: ips, Ready: true, Ordinal: -1, Role: role,
		Labels: map[string]string{ordinal.JobCompletionIndexLabel: index}, CPUMillicores: milli,
	}
}

func ranker(t *testing.T, expected string, roles ...string) Ranker {
	t.Helper()
	n, err := hostsfile.NewNamer("{{.Role}}-{{.Index}}", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	exp, err := hostsfile.ParseExpected(expected)
	if err != nil {
		t.Fatal(err)
	}
	return Ranker{Namer: n, Expected: exp, Roles: roles}
}

// job is a launcher and workers 0, 2 and 10 (worker-1 expected, no address
// yet): the orders below tell worker-2 from worker-10.
var job = peer.NewSet(
	member("worker", "10", 2500, "10.0.0.10"), member("launcher", "0", 0, "10.0.0.1"),
	member("worker", "2", 999, "10.0.0.3"), member("worker", "0", 4000, "10.0.0.2", "fd00::2"),
)

func names(ms []Member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return out
}

func TestSplitName(t *testing.T) {
	for _, tc := range []struct {
		name, role string
		index      int
	}{
		{"worker-3", "worker", 3}, {"worker-10", "worker", 10}, {"ps-0", "ps", 0}, {"my-role-7", "my-role", 7},
		{"launcher", "launcher", -1}, {"web-x", "web-x", -1}, {"web-", "web-", -1}, {"-3", "-3", -1}, {"a-+3", "a-+3", -1},
	} {
		if role, index := SplitName(tc.name); role != tc.role || index != tc.index {
			t.Errorf("SplitName(%q) = %q, %d; want %q, %d", tc.name, role, index, tc.role, tc.index)
		}
	}
}

// TestOrder: rank order is role then index (numerically), expected names
// without an address included, -mpi-roles' list both filters and orders.
func TestOrder(t *testing.T) {
	all := ranker(t, "launcher=1,worker=3").Order(job)
	if got, want := names(all), []string{"launcher-0", "worker-0", "worker-1", "worker-2", "worker-10"}; !slices.Equal(got, want) {
		t.Errorf("Order = %q, want %q", got, want)
	}
	if all[2].Peer != nil || all[1].Peer == nil || all[1].Peer.Pod != "worker-0-x7k2p" {
		t.Errorf("peers: worker-1 %v, worker-0 %v; want none and worker-0-x7k2p", all[2].Peer, all[1].Peer)
	}
	if got, want := names(ranker(t, "", "worker").Order(job)), []string{"worker-0", "worker-2", "worker-10"}; !slices.Equal(got, want) {
		t.Errorf("Order of workers = %q, want %q", got, want)
	}
	if got, want := names(ranker(t, "", "worker", "launcher").Order(job)), []string{"worker-0", "worker-2", "worker-10", "launcher-0"}; !slices.Equal(got, want) {
		t.Errorf("Order with the launcher last = %q, want %q", got, want)
	}
	if i := Self(all, member("worker", "2", 0).FQDN); i != 3 {
		t.Errorf("Self(worker-2) = %d, want 3", i)
	}
	if i := Self(all, "nobody"); i != -1 {
		t.Errorf("Self(nobody) = %d, want -1", i)
	}
}

func TestSlots(t *testing.T) {
	for in, want := range map[string]Slots{"1": {N: 1}, "8": {N: 8}, "auto": {Auto: true}, " AUTO ": {Auto: true}} {
		if got, err := ParseSlots(in); err != nil || got != want {
			t.Errorf("ParseSlots(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"0", "-1", "x", "", "1.5", "2000000"} {
		if _, err := ParseSlots(in); err == nil {
			t.Errorf("ParseSlots(%q) succeeded", in)
		}
	}
	auto := Slots{Auto: true}
	p := member("worker", "0", 0)
	for _, tc := range []struct {
		milli int64
		known int
		want  int
	}{{4000, 0, 4}, {2500, 0, 2}, {999, 0, 1}, {0, 0, 1}, {0, 6, 6}, {3000, 6, 3}} {
		p.CPUMillicores = tc.milli
		if got := auto.Of(Member{Name: "worker-0", Peer: &p}, map[string]int{"worker-0": tc.known}); got != tc.want {
			t.Errorf("auto slots of %dm (known %d) = %d, want %d", tc.milli, tc.known, got, tc.want)
		}
	}
	if got := auto.Of(Member{Name: "worker-0"}, map[string]int{"worker-0": 3}); got != 3 {
		t.Errorf("auto slots of a name without a peer = %d, want the known 3", got)
	}
}

func TestHostfileGolden(t *testing.T) {
	golden.Check(t, "hostfile-slots-1", RenderHostfile(ranker(t, "launcher=1,worker=3").Order(job), Slots{N: 1}, nil))
	golden.Check(t, "hostfile-auto-workers", RenderHostfile(ranker(t, "worker=3", "worker").Order(job), Slots{Auto: true}, nil))
}

// TestFileSink: the file is written, an unchanged one is not rewritten,
// and a failing render leaves the last file whole.
func TestFileSink(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hostfile")
	fail := errors.New("no names")
	var next []byte
	var err error
	f, nerr := NewFile("mpi-hostfile", path, func(sink.Delivery) ([]byte, error) { return next, err }, nil)
	if nerr != nil {
		t.Fatal(nerr)
	}
	ctx := context.Background()
	next = []byte("worker-0 slots=1\nworker-1 slots=1\n")
	if err := f.Apply(ctx, sink.Delivery{Set: job, Generation: 1}); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	if err := f.Apply(ctx, sink.Delivery{Set: job, Generation: 2}); err != nil {
		t.Fatal(err)
	}
	if st2, _ := os.Stat(path); !os.SameFile(st, st2) {
		t.Errorf("an unchanged file was rewritten")
	}
	next, err = []byte("worker-0 slots=1\n"), fail
	if got := f.Apply(ctx, sink.Delivery{Set: job, Generation: 3}); !errors.Is(got, fail) || !strings.Contains(got.Error(), "mpi-hostfile") {
		t.Errorf("Apply with a failing render = %v, want it wrapped with the sink's name", got)
	}
	if b, _ := os.ReadFile(path); string(b) != "worker-0 slots=1\nworker-1 slots=1\n" {
		t.Errorf("after a failed render the file holds %q", b)
	}
}

// TestMPIRememberedSlots: with -mpi-slots=auto, a worker between two pods
// (expected, no address) keeps the slots its pod had.
func TestMPIRememberedSlots(t *testing.T) {
	m := &MPI{Ranker: ranker(t, "worker=2", "worker"), Slots: Slots{Auto: true}}
	both := peer.NewSet(member("worker", "0", 2000, "10.0.0.1"), member("worker", "1", 3000, "10.0.0.2"))
	if out, err := m.Render(sink.Delivery{Set: both}); err != nil || string(out) != "worker-0 slots=2\nworker-1 slots=3\n" {
		t.Fatalf("Render = %q, %v", out, err)
	}
	one := peer.NewSet(member("worker", "0", 2000, "10.0.0.1"))
	if out, err := m.Render(sink.Delivery{Set: one}); err != nil || string(out) != "worker-0 slots=2\nworker-1 slots=3\n" {
		t.Errorf("Render without worker-1's pod = %q, %v; want its 3 slots kept", out, err)
	}
	if _, err := (&MPI{Ranker: ranker(t, "", "ps")}).Render(sink.Delivery{Set: both}); err == nil {
		t.Errorf("Render with no member to list succeeded")
	}
}
