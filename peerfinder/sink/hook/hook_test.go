package hook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/internal/testing/syncbuf"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
	"github.com/flockd/flock/peerfinder/sink/hook"
	"github.com/prometheus/procfs"
)

// delivery returns a delivery of n peers named peer-NNNN.svc.cluster.local
// in which all peers are added.
func delivery(n int, first bool) sink.Delivery {
	ps := make([]peer.Peer, n)
	for i := range ps {
		ps[i] = peer.Peer{FQDN: fmt.Sprintf("peer-%04d.zk.default.svc.cluster.local", i), Ordinal: i, Ready: true}
	}
	set := peer.NewSet(ps...)
	return sink.Delivery{Set: set, Self: set.Keys()[0], Generation: 1, First: first, Added: set.Keys()}
}

func zkDelivery() sink.Delivery {
	return sink.Delivery{
		Set: peer.NewSet(
			peer.Peer{FQDN: "zk-2.zk.ns.svc.cluster.local"},
			peer.Peer{FQDN: "zk-0.zk.ns.svc.cluster.local"},
			peer.Peer{FQDN: "zk-1.zk.ns.svc.cluster.local"},
		),
		Self:       "zk-0.zk.ns.svc.cluster.local",
		Generation: 4,
		Added:      []string{"zk-1.zk.ns.svc.cluster.local", "zk-2.zk.ns.svc.cluster.local"},
		Removed:    []string{"zk-9.zk.ns.svc.cluster.local"},
	}
}

// lockedBuffer is an io.Writer safe for concurrent use by slog handlers.
type lockedBuffer struct{ syncbuf.Buffer }

func (b *lockedBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(b.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		recs = append(recs, rec)
	}
	return recs
}

// newHook returns a Hook whose commands may be helpers and whose log goes
// to the returned buffer.
func newHook(t *testing.T, cfg hook.Config) (*hook.Hook, *lockedBuffer) {
	t.Helper()
	logs := &lockedBuffer{}
	cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	// The race detector sleeps 1s before a successful exit by default.
	cfg.Env = append(cfg.Env, helperEnv+"=1", "GORACE=atexit_sleep_ms=0")
	h, err := hook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h, logs
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	pid, err := strconv.Atoi(string(readFile(t, path)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// awaitGone waits 2s for pid to exit (no such process, or a zombie waiting
// for whoever inherited it), or kills it and fails the test naming what.
func awaitGone(t *testing.T, pid int, what string) {
	t.Helper()
	gone := false
	defer func() {
		if !gone {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}()
	await.Poll{Timeout: 2 * time.Second, Every: 10 * time.Millisecond}.Until(t, func() bool {
		if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			return true
		}
		p, err := procfs.NewProc(pid)
		if err != nil {
			return false
		}
		st, err := p.Stat()
		return err == nil && st.State == "Z"
	}, "process %d to end %s", pid, what)
	gone = true
}

func TestParseCommand(t *testing.T) {
	dir := t.TempDir()
	spaced := filepath.Join(dir, "my hook.sh")
	if err := os.WriteFile(spaced, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "local.sh"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	tests := []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{in: "/work-dir/on-start.sh", want: []string{"/work-dir/on-start.sh"}},
		{in: `"/work-dir/on-start.sh"`, want: []string{"/work-dir/on-start.sh"}},
		{in: `'/work-dir/on-start.sh'`, want: []string{"/work-dir/on-start.sh"}},
		{in: "  /hooks/zk.sh --id 1\t", want: []string{"/hooks/zk.sh", "--id", "1"}},
		{in: `/bin/echo "a b" 'c $HOME' d\ e`, want: []string{"/bin/echo", "a b", "c $HOME", "d e"}},
		{in: `/bin/echo $HOME *`, want: []string{"/bin/echo", "$HOME", "*"}},
		{in: "/bin/echo a#b # comment", want: []string{"/bin/echo", "a#b"}},
		{in: " " + spaced + " ", want: []string{spaced}},
		{in: "local.sh", want: []string{"./local.sh"}},
		{in: "", wantErr: true},
		{in: "  \n", wantErr: true},
		{in: "# only a comment", wantErr: true},
		{in: `"/work-dir/on-start.sh`, wantErr: true},
		{in: `""`, wantErr: true},
	}
	for _, tt := range tests {
		got, err := hook.ParseCommand(tt.in)
		if (err != nil) != tt.wantErr || !slices.Equal(got, tt.want) {
			t.Errorf("ParseCommand(%q) = %q, %v; want %q, error %t", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestRender(t *testing.T) {
	d := zkDelivery()
	const lines = "zk-0.zk.ns.svc.cluster.local\nzk-1.zk.ns.svc.cluster.local\nzk-2.zk.ns.svc.cluster.local"
	tests := []struct {
		format  hook.Format
		newline bool
		want    string
	}{
		{format: "", want: lines},
		{format: hook.FormatLines, want: lines},
		{format: hook.FormatLines, newline: true, want: lines + "\n"},
		{format: hook.FormatJSON, want: `{"version":1,"self":"zk-0.zk.ns.svc.cluster.local","generation":4,"peers":[` +
			`{"fqdn":"zk-0.zk.ns.svc.cluster.local","ready":false,"ordinal":0},` +
			`{"fqdn":"zk-1.zk.ns.svc.cluster.local","ready":false,"ordinal":0},` +
			`{"fqdn":"zk-2.zk.ns.svc.cluster.local","ready":false,"ordinal":0}]}` + "\n"},
		{format: hook.FormatJSON, newline: true, want: `{"version":1,"self":"zk-0.zk.ns.svc.cluster.local","generation":4,"peers":[` +
			`{"fqdn":"zk-0.zk.ns.svc.cluster.local","ready":false,"ordinal":0},` +
			`{"fqdn":"zk-1.zk.ns.svc.cluster.local","ready":false,"ordinal":0},` +
			`{"fqdn":"zk-2.zk.ns.svc.cluster.local","ready":false,"ordinal":0}]}` + "\n"},
	}
	for _, tt := range tests {
		got, err := hook.Render(d, tt.format, tt.newline)
		if err != nil || string(got) != tt.want {
			t.Errorf("Render(%q, %t) = %q, %v; want %q", tt.format, tt.newline, got, err, tt.want)
		}
	}
	if got, err := hook.Render(sink.Delivery{}, hook.FormatLines, true); err != nil || len(got) != 0 {
		t.Errorf("Render(empty) = %q, %v; want no bytes", got, err)
	}
	if _, err := hook.Render(d, "yaml", false); err == nil {
		t.Error("Render with unknown format: no error")
	}
	withIPs := sink.Delivery{Set: peer.NewSet(
		peer.Peer{FQDN: "b.ns.pod.cluster.local", IPs: []string{"10.0.0.2", "fd00::2"}},
		peer.Peer{FQDN: "a.ns.pod.cluster.local", IPs: []string{"10.0.0.1"}},
		peer.Peer{FQDN: "c.ns.pod.cluster.local"},
	)}
	const want = "a.ns.pod.cluster.local 10.0.0.1\nb.ns.pod.cluster.local 10.0.0.2 fd00::2\nc.ns.pod.cluster.local\n"
	if got, err := hook.Render(withIPs, hook.FormatLinesIP, true); err != nil || string(got) != want {
		t.Errorf("Render(lines-ip) = %q, %v; want %q", got, err, want)
	}
	if f, err := hook.ParseFormat("lines-ip"); err != nil || f != hook.FormatLinesIP {
		t.Errorf("ParseFormat(lines-ip) = %q, %v", f, err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for name, cfg := range map[string]hook.Config{
		"empty on-start":  {OnStart: []string{}},
		"empty program":   {OnChange: []string{""}},
		"unknown format":  {OnChange: []string{"/bin/true"}, Format: "xml"},
		"negative timout": {OnChange: []string{"/bin/true"}, Timeout: -time.Second},
	} {
		if _, err := hook.New(cfg); err == nil {
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
}

func TestApplyWritesStdin(t *testing.T) {
	d := zkDelivery()
	const lines = "zk-0.zk.ns.svc.cluster.local\nzk-1.zk.ns.svc.cluster.local\nzk-2.zk.ns.svc.cluster.local"
	tests := []struct {
		name    string
		format  hook.Format
		newline bool
		want    string
	}{
		{name: "upstream bytes", want: lines},
		{name: "trailing newline", newline: true, want: lines + "\n"},
		{name: "json", format: hook.FormatJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "stdin")
			h, _ := newHook(t, hook.Config{OnChange: helper("stdin-to-file", out), Format: tt.format, TrailingNewline: tt.newline})
			if err := apply(t, h, context.Background(), d); err != nil {
				t.Fatal(err)
			}
			got := readFile(t, out)
			if tt.format == hook.FormatJSON {
				var doc sink.Document
				if err := json.Unmarshal(got, &doc); err != nil {
					t.Fatalf("stdin %q: %v", got, err)
				}
				if doc.Version != 1 || doc.Self != d.Self || doc.Generation != 4 || len(doc.Peers) != 3 {
					t.Errorf("stdin document = %+v", doc)
				}
				return
			}
			if string(got) != tt.want {
				t.Errorf("stdin = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestApplyEnvironment(t *testing.T) {
	// Inherited values of our variables must not leak through; others must.
	t.Setenv(hook.EnvBootstrap, "stale")
	t.Setenv(hook.EnvFormer, "stale")
	t.Setenv(hook.EnvPeersAdded, "stale")
	t.Setenv(hook.EnvSelfIP, "stale")
	t.Setenv("PEER_FINDER_USER_SETTING", "kept")
	base := map[string]string{
		"PEER_FINDER_USER_SETTING": "kept",
		"EXTRA":                    "x=1",
		hook.EnvSelf:               "zk-0.zk.ns.svc.cluster.local",
		hook.EnvGeneration:         "4",
		hook.EnvPeersAdded:         "zk-1.zk.ns.svc.cluster.local zk-2.zk.ns.svc.cluster.local",
		hook.EnvPeersRemoved:       "zk-9.zk.ns.svc.cluster.local",
	}
	with := func(kv ...string) map[string]string {
		m := maps.Clone(base)
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name   string
		modify func(*sink.Delivery)
		want   map[string]string
	}{
		{name: "change", modify: func(*sink.Delivery) {}, want: with(hook.EnvEvent, "change")},
		{name: "start with role", modify: func(d *sink.Delivery) { d.First, d.Bootstrap = true, "form" },
			want: with(hook.EnvEvent, "start", hook.EnvBootstrap, "form")},
		{name: "joins the former", modify: func(d *sink.Delivery) { d.Bootstrap, d.Former = "join", "zk-1.zk.ns.svc.cluster.local" },
			want: with(hook.EnvEvent, "change", hook.EnvBootstrap, "join", hook.EnvFormer, "zk-1.zk.ns.svc.cluster.local")},
		{name: "nothing removed", modify: func(d *sink.Delivery) { d.Removed = nil },
			want: with(hook.EnvEvent, "change", hook.EnvPeersRemoved, "")},
		{name: "self with IPs", modify: func(d *sink.Delivery) {
			d.Set = peer.NewSet(peer.Peer{FQDN: d.Self, IPs: []string{"10.0.0.7", "fd00::7"}})
		}, want: with(hook.EnvEvent, "change", hook.EnvSelfIP, "10.0.0.7 fd00::7")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "env")
			h, _ := newHook(t, hook.Config{OnChange: helper("env-to-file", out), Env: []string{"EXTRA=x=1"}})
			d := zkDelivery()
			tt.modify(&d)
			if err := apply(t, h, context.Background(), d); err != nil {
				t.Fatal(err)
			}
			var got map[string]string
			if err := json.Unmarshal(readFile(t, out), &got); err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("environment:\ngot  %v\nwant %v", got, tt.want)
			}
		})
	}
}

func TestApplySelectsHook(t *testing.T) {
	tests := []struct {
		name              string
		onStart, onChange bool
		first             bool
		want              string // which hook ran, "" for none
	}{
		{name: "first runs on-start", onStart: true, onChange: true, first: true, want: "on-start"},
		{name: "later runs on-change", onStart: true, onChange: true, first: false, want: "on-change"},
		{name: "first without on-start runs on-change", onChange: true, first: true, want: "on-change"},
		{name: "later without on-change runs nothing", onStart: true, first: false, want: ""},
		{name: "init mode first", onStart: true, first: true, want: "on-start"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			var cfg hook.Config
			if tt.onStart {
				cfg.OnStart = helper("stdin-to-file", filepath.Join(dir, "on-start"))
			}
			if tt.onChange {
				cfg.OnChange = helper("stdin-to-file", filepath.Join(dir, "on-change"))
			}
			h, _ := newHook(t, cfg)
			if err := apply(t, h, context.Background(), delivery(2, tt.first)); err != nil {
				t.Fatal(err)
			}
			ran, _ := filepath.Glob(filepath.Join(dir, "on-*"))
			var want []string
			if tt.want != "" {
				want = []string{filepath.Join(dir, tt.want)}
			}
			if !slices.Equal(ran, want) {
				t.Errorf("ran %q, want %q", ran, want)
			}
		})
	}
}

func TestApplyReportsExitStatus(t *testing.T) {
	h, logs := newHook(t, hook.Config{OnStart: helper("exit", "3")})
	err := apply(t, h, context.Background(), delivery(1, true))
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("Apply = %v, want an exit error with status 3", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "on-start") || !strings.Contains(msg, "exit status 3") {
		t.Errorf("error %q does not name the hook and status", msg)
	}
	if n := len(logs.records(t)); n != 2 {
		t.Errorf("logged %d output lines of a failing hook, want 2", n)
	}
}

func TestApplyStartError(t *testing.T) {
	h, _ := newHook(t, hook.Config{OnChange: []string{filepath.Join(t.TempDir(), "missing.sh")}})
	err := apply(t, h, context.Background(), delivery(1, false))
	if err == nil || !strings.Contains(err.Error(), "missing.sh") || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Apply = %v, want a not-exist error naming the program", err)
	}
}

func TestApplyTimeoutKillsProcessGroup(t *testing.T) {
	for _, mode := range []string{"obeys-term", "ignore-term"} {
		t.Run(mode, func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "pid")
			h, _ := newHook(t, hook.Config{
				OnChange: helper("hang", pidFile, mode),
				// Long enough for a busy machine to start the helper and
				// its grandchild before the timeout kills them.
				Timeout:   2 * time.Second,
				KillGrace: 300 * time.Millisecond,
			})
			start := time.Now()
			err := apply(t, h, context.Background(), delivery(3, false))
			if !errors.Is(err, hook.ErrTimeout) {
				t.Fatalf("Apply = %v, want ErrTimeout", err)
			}
			if elapsed := time.Since(start); elapsed > 10*time.Second {
				t.Errorf("Apply took %s", elapsed)
			}
			if !strings.Contains(err.Error(), "on-change") {
				t.Errorf("error %q does not name the hook", err)
			}
			awaitGone(t, readPid(t, pidFile), "after the timeout")
		})
	}
}

func TestApplyCancelKillsProcessGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	h, _ := newHook(t, hook.Config{OnChange: helper("hang", pidFile), KillGrace: 300 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- h.Apply(ctx, delivery(3, false)) }()
	// Cancel once the grandchild runs, not after a fixed time: a busy
	// machine can take longer than any fixed time to start the helper.
	await.Until(t, func() bool { _, err := os.Stat(pidFile); return err == nil }, "the hook to start its grandchild")
	cancel()
	err := await.Recv(t, errc, "Apply to return after cancel")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Apply = %v, want context.Canceled", err)
	}
	awaitGone(t, readPid(t, pidFile), "after cancel")
	// A done context does not start the hook at all.
	out := filepath.Join(t.TempDir(), "stdin")
	h, _ = newHook(t, hook.Config{OnChange: helper("stdin-to-file", out)})
	if err := apply(t, h, ctx, delivery(1, false)); !errors.Is(err, context.Canceled) {
		t.Errorf("Apply with done context = %v, want context.Canceled", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("hook ran with a done context")
	}
}

func TestApplyLargeInput(t *testing.T) {
	d := delivery(5000, true) // all 5,000 FQDNs added: too long for the environment
	want, _ := hook.Render(d, hook.FormatLines, false)
	t.Run("never reads and exits", func(t *testing.T) {
		h, _ := newHook(t, hook.Config{OnStart: helper("never-read"), Timeout: 10 * time.Second})
		if err := apply(t, h, context.Background(), d); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("reads slowly", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "count")
		h, _ := newHook(t, hook.Config{OnStart: helper("slow-read", out), Timeout: 30 * time.Second})
		if err := apply(t, h, context.Background(), d); err != nil {
			t.Fatal(err)
		}
		if got := string(readFile(t, out)); got != strconv.Itoa(len(want)) {
			t.Errorf("hook read %s bytes, want %d", got, len(want))
		}
	})
	t.Run("reads everything", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "stdin")
		h, _ := newHook(t, hook.Config{OnStart: helper("stdin-to-file", out)})
		if err := apply(t, h, context.Background(), d); err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, out); !bytes.Equal(got, want) {
			t.Errorf("hook read %d bytes, want %d", len(got), len(want))
		}
	})
	t.Run("added list too long for the environment", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "env")
		h, _ := newHook(t, hook.Config{OnStart: helper("env-to-file", out)})
		if err := apply(t, h, context.Background(), d); err != nil {
			t.Fatal(err)
		}
		var env map[string]string
		if err := json.Unmarshal(readFile(t, out), &env); err != nil {
			t.Fatal(err)
		}
		if _, ok := env[hook.EnvPeersAdded]; ok {
			t.Errorf("%s set with %d bytes, want it unset", hook.EnvPeersAdded, len(env[hook.EnvPeersAdded]))
		}
		if env[hook.EnvPeersRemoved] != "" || env[hook.EnvEvent] != "start" {
			t.Errorf("environment %v", env)
		}
	})
	t.Run("never reads and hangs", func(t *testing.T) {
		pidFile := filepath.Join(t.TempDir(), "pid")
		h, _ := newHook(t, hook.Config{OnStart: helper("hang", pidFile), Timeout: 500 * time.Millisecond, KillGrace: 200 * time.Millisecond})
		if err := apply(t, h, context.Background(), d); !errors.Is(err, hook.ErrTimeout) {
			t.Fatalf("Apply = %v, want ErrTimeout", err)
		}
	})
}

func TestApplyZooKeeperQuotedScript(t *testing.T) {
	// Kubernetes' ZooKeeper manifest has args: ["-on-start=\"/work-dir/on-start.sh\""],
	// so the flag value carries the quotes.
	dir := t.TempDir()
	script := filepath.Join(dir, "on-start.sh")
	body := "#!/bin/sh\necho \"args:$*\"\ncat > \"$(dirname \"$0\")/stdin\"\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, value := range []string{`"` + script + `"`, `"` + script + `" --server 1`} {
		argv, err := hook.ParseCommand(value)
		if err != nil {
			t.Fatal(err)
		}
		h, logs := newHook(t, hook.Config{OnStart: argv})
		d := zkDelivery()
		d.First = true
		if err := apply(t, h, context.Background(), d); err != nil {
			t.Fatalf("%s: %v", value, err)
		}
		want := "zk-0.zk.ns.svc.cluster.local\nzk-1.zk.ns.svc.cluster.local\nzk-2.zk.ns.svc.cluster.local"
		if got := string(readFile(t, filepath.Join(dir, "stdin"))); got != want {
			t.Errorf("%s: stdin = %q, want %q", value, got, want)
		}
		// The log shows the output and that the script ran, by its path
		// without the quotes (upstream's peer-finder runs nothing and says
		// nothing).
		var lines, ran []map[string]any
		for _, r := range logs.records(t) {
			switch r["msg"] {
			case "hook output":
				lines = append(lines, r)
			case "hook ran":
				ran = append(ran, r)
			default:
				t.Errorf("%s: record %v", value, r)
			}
		}
		wantArgs := "args:" + strings.Join(argv[1:], " ")
		if len(lines) != 1 || lines[0]["line"] != wantArgs {
			t.Errorf("%s: output %v, want one line %q", value, lines, wantArgs)
		}
		if len(ran) != 1 || ran[0]["hook"] != "on-start" || ran[0]["command"] != strings.Join(argv, " ") ||
			!strings.HasPrefix(fmt.Sprint(ran[0]["command"]), script) || ran[0]["level"] != "INFO" {
			t.Errorf("%s: %v, want one INFO record \"hook ran\" of on-start naming %s", value, ran, script)
		}
	}
}

func TestApplyLogsOutput(t *testing.T) {
	h, logs := newHook(t, hook.Config{OnChange: helper("output")})
	if err := apply(t, h, context.Background(), delivery(1, false)); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range logs.records(t) {
		if r["msg"] == "hook ran" {
			continue
		}
		if r["msg"] != "hook output" || r["hook"] != "on-change" || r["level"] != "INFO" {
			t.Errorf("record %v", r)
		}
		got = append(got, fmt.Sprint(r["stream"], ":", r["line"]))
	}
	slices.Sort(got) // the two streams interleave arbitrarily
	want := []string{"stderr:oops", "stdout:", "stdout:hello", "stdout:world"}
	if !slices.Equal(got, want) {
		t.Errorf("logged %q, want %q", got, want)
	}
}

func TestApplyBackgroundProcessHoldingStdout(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	h, logs := newHook(t, hook.Config{OnChange: helper("background", pidFile)})
	start := time.Now()
	if err := apply(t, h, context.Background(), delivery(1, false)); err != nil {
		t.Fatal(err)
	}
	pid := readPid(t, pidFile)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	if elapsed := time.Since(start); elapsed > 3*time.Second {
		t.Errorf("Apply waited %s for a background process's output", elapsed)
	}
	if recs := logs.records(t); len(recs) != 2 || recs[0]["line"] != "started" || recs[1]["msg"] != "hook ran" {
		t.Errorf("logs %v, want the hook's line, then that it ran", recs)
	}
}
