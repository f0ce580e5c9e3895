package jobfile

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"os/exec"
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
	out := RenderHostfile(ranker(t, "launcher=1,worker=3").Order(job), Slots{N: 1}, nil)
	golden.Check(t, "hostfile-slots-1", out)
	if !IsHostfile(out) {
		t.Errorf("IsHostfile refuses what RenderHostfile wrote:\n%s", out)
	}
	golden.Check(t, "hostfile-auto-workers", RenderHostfile(ranker(t, "worker=3", "worker").Order(job), Slots{Auto: true}, nil))
}

// TestRendezvousGolden: torch's variables and TF's TF_CONFIG for worker-2
// (rank 3 of launcher-0, worker-0, worker-1, worker-2, worker-10).
func TestRendezvousGolden(t *testing.T) {
	self := member("worker", "2", 0).FQDN
	d := sink.Delivery{Set: job, Self: self, Generation: 1}
	for _, f := range []Framework{Torch, TF} {
		r := Rendezvous{Ranker: ranker(t, "launcher=1,worker=3"), Framework: f, Port: f.DefaultPort()}
		out, err := r.Render(d)
		if err != nil {
			t.Fatal(err)
		}
		golden.Check(t, string(f)+".env", out)
	}
	c := TFConfigOf(ranker(t, "chief=1,worker=3", "chief", "worker").Order(peer.NewSet(
		member("chief", "0", 0, "10.0.0.1"), member("worker", "1", 0, "10.0.0.2"),
		member("worker", "0", 0, "10.0.0.3"), member("ps", "0", 0, "10.0.0.4"))), 2, 2222)
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "tf-config.json", append(b, '\n'))
}

// TestTorchEnvNotRanked: a member whose role is not ranked (the launcher
// of -rendezvous-roles=worker) gets the world but no RANK, and no TF task.
func TestTorchEnvNotRanked(t *testing.T) {
	ms := ranker(t, "worker=3", "worker").Order(job)
	launcher := member("launcher", "0", 0).FQDN
	env := TorchEnv(ms, Self(ms, launcher), 29500)
	want := []Var{{"MASTER_ADDR", "worker-0"}, {"MASTER_PORT", "29500"}, {"WORLD_SIZE", "4"}}
	if !slices.Equal(env, want) {
		t.Errorf("TorchEnv = %v, want %v", env, want)
	}
	if c := TFConfigOf(ms, Self(ms, launcher), 2222); c.Task != nil || len(c.Cluster["worker"]) != 4 {
		t.Errorf("TFConfigOf = %+v; want no task, 4 workers", c)
	}
}

// TestTFConfigEvaluator: TensorFlow's evaluator is not part of the
// training cluster: it gets its task, and no member sees it listed.
func TestTFConfigEvaluator(t *testing.T) {
	ms := ranker(t, "chief=1,evaluator=1,worker=2").Order(peer.NewSet())
	c := TFConfigOf(ms, 1, 2222) // chief-0, evaluator-0, worker-0, worker-1
	if c.Task == nil || *c.Task != (TFTask{Type: "evaluator", Index: 0}) {
		t.Errorf("evaluator's task = %+v, want evaluator 0", c.Task)
	}
	want := map[string][]string{"chief": {"chief-0:2222"}, "worker": {"worker-0:2222", "worker-1:2222"}}
	if !maps.EqualFunc(c.Cluster, want, slices.Equal) {
		t.Errorf("cluster = %v, want %v", c.Cluster, want)
	}
	if c := TFConfigOf(ms, 3, 2222); c.Task == nil || *c.Task != (TFTask{Type: "worker", Index: 1}) {
		t.Errorf("worker-1's task = %+v, want worker 1", c.Task)
	}
}

// TestEnvFileIsSourcedExactly: values with quotes, $, backquotes, spaces
// and newlines come back byte for byte from a real shell's `. FILE`.
func TestEnvFileIsSourcedExactly(t *testing.T) {
	vars := []Var{{"A", `it's "x" $HOME ` + "`id`" + ` \n`}, {"B", "line1\nline2"}, {"C", ""}, {"D", `'`}, {"TF_CONFIG", `{"cluster":{"worker":["w-0:2222"]}}`}}
	path := filepath.Join(t.TempDir(), "env")
	if err := os.WriteFile(path, RenderEnvFile(vars), 0o644); err != nil {
		t.Fatal(err)
	}
	if !IsEnvFile(RenderEnvFile(vars)) {
		t.Errorf("IsEnvFile refuses what RenderEnvFile wrote:\n%s", RenderEnvFile(vars))
	}
	for _, v := range vars {
		out, err := exec.Command("sh", "-c", `. "$1" && printf %s "$`+v.Name+`"`, "sh", path).Output()
		if err != nil {
			t.Fatalf("sourcing %s: %v", path, err)
		}
		if string(out) != v.Value {
			t.Errorf("%s sourced = %q, want %q", v.Name, out, v.Value)
		}
	}
}

// TestFileSink: the file is written, an unchanged one is not rewritten,
// and a failing render leaves the last file whole.
func TestFileSink(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hostfile")
	fail := errors.New("no names")
	var next []byte
	var err error
	f, nerr := NewFile("mpi-hostfile", path, func(sink.Delivery) ([]byte, error) { return next, err }, IsHostfile, nil)
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

// TestFileReplacesOnlyItsOwnKind: -mpi-hostfile or -rendezvous-file naming
// a file that is not one (a hosts file, /etc/passwd in a shared volume) is
// left whole and the sink fails naming it; an empty file, or one of its
// own kind, is replaced.
func TestFileReplacesOnlyItsOwnKind(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, out string
		kind      func([]byte) bool
		ours      []string
	}{
		{"mpi-hostfile", "worker-0 slots=2\n", IsHostfile, []string{"", "\n", "worker-0 slots=1\nlauncher-0 slots=1\n"}},
		{"rendezvous-file", "RANK='1'\n", IsEnvFile, []string{"", "MASTER_ADDR='w-0'\nTF_CONFIG='{}'\n"}},
	} {
		f, err := NewFile(tc.name, filepath.Join(t.TempDir(), "out"), func(sink.Delivery) ([]byte, error) { return []byte(tc.out), nil }, tc.kind, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, foreign := range []string{"127.0.0.1\tlocalhost\n", "root:x:0:0:root:/root:/bin/sh\n", "worker-0 slots=1\nextra\n", "A='x'\nB='unterminated\n", "A='x' trailing\n"} {
			if err := os.WriteFile(f.path, []byte(foreign), 0o644); err != nil {
				t.Fatal(err)
			}
			err := f.Apply(ctx, sink.Delivery{Set: job, Generation: 1})
			if b, _ := os.ReadFile(f.path); err == nil || !strings.Contains(err.Error(), "refusing") || string(b) != foreign {
				t.Errorf("%s: Apply over %q = %v, the file now %q; want it refused and left whole", tc.name, foreign, err, b)
			}
		}
		for _, own := range tc.ours {
			if err := os.WriteFile(f.path, []byte(own), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := f.Apply(ctx, sink.Delivery{Set: job, Generation: 1}); err != nil {
				t.Errorf("%s: Apply over %q = %v", tc.name, own, err)
			}
		}
	}
}
