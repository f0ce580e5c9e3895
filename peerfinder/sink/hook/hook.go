// Package hook implements the hook sink: it runs a program on each delivery,
// as upstream peer-finder's -on-start and -on-change do, but waits for it,
// checks its exit status and logs its output.
//
// A hook runs without a shell (see ParseCommand), in its own process group.
// It reads the peer set on stdin (see Render and Format) and gets the
// environment of flock plus Config.Env plus these variables, which replace
// any inherited ones of the same name:
//
//	PEER_FINDER_EVENT          "start" on this sink's first delivery (Delivery.First),
//	                           whichever hook runs it; "change" afterwards
//	PEER_FINDER_SELF           this member's FQDN
//	PEER_FINDER_SELF_IP        this member's IPs as the sources see them, space-separated; unset when none
//	PEER_FINDER_GENERATION     the set's generation, a decimal number from 1
//	PEER_FINDER_PEERS_ADDED    FQDNs added since the last successful run, sorted,
//	                           separated by single spaces (all peers on the first run)
//	PEER_FINDER_PEERS_REMOVED  FQDNs removed since the last successful run, likewise
//	PEER_FINDER_BOOTSTRAP      "form" or "join"; unset when no role is known
//	PEER_FINDER_FORMER         the FQDN of the member that formed the cluster,
//	                           the one joiners target; unset when not known
//
// Space separation lets `for p in $PEER_FINDER_PEERS_ADDED` work in any
// POSIX shell. The lists are kept in the environment only while both fit:
// each at most 64 KiB (roughly 1,500 FQDNs; a single environment string may
// not exceed 128 KiB on Linux), and together within what the kernel leaves
// of its limit on argv plus environment (a quarter of RLIMIT_STACK, at
// least 128 KiB and at most 6 MiB) after the argv and the rest of the
// environment. Otherwise neither is set and the hook gets instead
//
//	PEER_FINDER_PEERS_TRUNCATED      "1"
//	PEER_FINDER_PEERS_ADDED_FILE     a file with the added FQDNs, one per line
//	PEER_FINDER_PEERS_REMOVED_FILE   likewise for the removed ones
//
// The files are in a new directory under os.TempDir(), removed after the
// run; a Warn record "hook peer lists passed in files" says so. When the
// files cannot be written either (a read-only /tmp), the hook gets
// PEER_FINDER_PEERS_TRUNCATED=1 alone, and must compare stdin, which always
// holds the full set, with its own record.
//
// Each line the hook writes to stdout or stderr is logged at Info with the
// message "hook output" and the keys hook ("on-start" or "on-change"),
// stream ("stdout" or "stderr") and line, up to MaxOutputLines records and
// MaxOutputBytes bytes per run; the rest is read and dropped, and one Warn
// record "hook output dropped" gives the dropped lines and bytes. The pipes are closed shortly after
// the hook exits, so a background process it leaves behind should redirect
// its output. Not reading stdin is fine: the hook may exit without reading
// it, or read it slowly.
//
// A hook runs only when what it receives changes: a delivery whose stdin
// (the names, in the lines format; the document apart from its generation,
// in json), bootstrap role and former equal those of the last run, when that run
// succeeded, succeeds without running it. After a failed run the next
// delivery runs the hook whatever it carries, the input of the last
// success included: the failed run may have changed the application part
// way.
//
// On timeout, when the Apply context ends, and when the hook was killed by a
// signal from outside (its run failed, so what is left of its group would
// race the retry), the whole process group gets SIGTERM, then SIGKILL after
// Config.KillGrace. The hook is always waited
// for, so it never becomes a zombie of flock.
package hook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/flockd/flock/peerfinder/sink"
)

// Environment variable names set for every hook run.
const (
	EnvEvent        = "PEER_FINDER_EVENT"
	EnvSelf         = "PEER_FINDER_SELF"
	EnvGeneration   = "PEER_FINDER_GENERATION"
	EnvPeersAdded   = "PEER_FINDER_PEERS_ADDED"
	EnvPeersRemoved = "PEER_FINDER_PEERS_REMOVED"
	EnvBootstrap    = "PEER_FINDER_BOOTSTRAP"
	EnvFormer       = "PEER_FINDER_FORMER"
	EnvSelfIP       = "PEER_FINDER_SELF_IP"

	EnvPeersTruncated   = "PEER_FINDER_PEERS_TRUNCATED"
	EnvPeersAddedFile   = "PEER_FINDER_PEERS_ADDED_FILE"
	EnvPeersRemovedFile = "PEER_FINDER_PEERS_REMOVED_FILE"
)

// DefaultKillGrace is the time between SIGTERM and SIGKILL when
// Config.KillGrace is zero.
const DefaultKillGrace = 2 * time.Second

// maxEnvList is the longest PEER_FINDER_PEERS_* value passed to a hook.
const maxEnvList = 64 << 10

// ErrTimeout is wrapped by the error Apply returns when the hook ran longer
// than Config.Timeout and was killed.
var ErrTimeout = errors.New("timed out")

// Config configures a Hook. The zero value of every field but the commands
// is a sensible default.
type Config struct {
	// OnStart is the argv run on the first delivery (Delivery.First). When
	// nil, OnChange runs instead.
	OnStart []string
	// OnChange is the argv run on every later delivery. When nil, later
	// deliveries succeed without running anything.
	OnChange []string
	// Timeout bounds one run of a hook; 0 means no limit.
	Timeout time.Duration
	// KillGrace is how long the process group has between SIGTERM and
	// SIGKILL after a timeout or cancellation; 0 means DefaultKillGrace.
	KillGrace time.Duration
	// Format is the stdin format; "" means FormatLines.
	Format Format
	// TrailingNewline ends FormatLines output with "\n" (upstream does not).
	TrailingNewline bool
	// Env holds extra "KEY=value" entries for the hook's environment.
	Env []string
	// Logger receives the hook's output lines; nil means slog.Default().
	Logger *slog.Logger
}

// Hook is a sink.Sink that runs a program per delivery. Its Apply runs one
// attempt; retrying is the engine's job. It is safe for use by one engine,
// which never calls Apply concurrently.
type Hook struct {
	cfg  Config
	log  *slog.Logger
	last []byte // input of the last run (see inputKey) if it succeeded; nil before any run and after a failed one
}

var _ sink.Sink = (*Hook)(nil)

// New checks cfg and returns a Hook. Commands, if set, must be non-empty.
func New(cfg Config) (*Hook, error) {
	for name, argv := range map[string][]string{"on-start": cfg.OnStart, "on-change": cfg.OnChange} {
		if argv != nil && (len(argv) == 0 || argv[0] == "") {
			return nil, fmt.Errorf("hook %s: empty command", name)
		}
	}
	format, err := ParseFormat(string(cfg.Format))
	if err != nil {
		return nil, err
	}
	if cfg.Timeout < 0 || cfg.KillGrace < 0 {
		return nil, errors.New("hook timeout and kill grace must not be negative")
	}
	cfg.Format = format
	if cfg.KillGrace == 0 {
		cfg.KillGrace = DefaultKillGrace
	}
	cfg.OnStart = slices.Clone(cfg.OnStart)
	cfg.OnChange = slices.Clone(cfg.OnChange)
	cfg.Env = slices.Clone(cfg.Env)
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Hook{cfg: cfg, log: log}, nil
}

// Apply runs the hook for d once: OnStart when d.First and OnStart is set,
// else OnChange; with no command to run it returns nil. It returns nil only
// when the hook exited with status 0. Otherwise the error names the hook and
// wraps the exit error (*exec.ExitError), ErrTimeout, or context.Cause(ctx)
// when ctx ended first (the hook is then killed, or not started).
func (h *Hook) Apply(ctx context.Context, d sink.Delivery) error {
	name, argv := "on-change", h.cfg.OnChange
	if d.First && h.cfg.OnStart != nil {
		name, argv = "on-start", h.cfg.OnStart
	}
	if argv == nil {
		return nil
	}
	stdin, err := Render(d, h.cfg.Format, h.cfg.TrailingNewline)
	if err != nil {
		return fmt.Errorf("hook %s: %w", name, err)
	}
	key, err := h.inputKey(d, stdin)
	if err != nil {
		return fmt.Errorf("hook %s: %w", name, err)
	}
	if h.last != nil && !d.First && bytes.Equal(key, h.last) {
		h.log.Debug("hook input unchanged, not run", "hook", name, "generation", d.Generation)
		return nil
	}
	start := time.Now()
	env, cleanup := h.environ(d, name, argv)
	defer cleanup()
	if err := h.run(ctx, name, argv, env, stdin); err != nil {
		h.last = nil
		return err
	}
	// Said even when the hook prints nothing: which command ran, as parsed
	// (a quoted -on-start value shows here without its quotes).
	h.log.Info("hook ran", "hook", name, "command", strings.Join(argv, " "), "generation", d.Generation,
		"duration", time.Since(start).Round(time.Millisecond))
	h.last = key
	return nil
}

// inputKey is what a run of the hook receives, for deciding whether the
// next delivery changes it: stdin (the names in the lines format; the
// document without its generation in json), the bootstrap role and the
// former. An IP,
// port or readiness change alone does not re-run a lines-format hook, as
// upstream runs on-change only when the list of names changes.
func (h *Hook) inputKey(d sink.Delivery, stdin []byte) ([]byte, error) {
	if h.cfg.Format == FormatJSON {
		d.Generation = 0
		var err error
		if stdin, err = Render(d, h.cfg.Format, h.cfg.TrailingNewline); err != nil {
			return nil, err
		}
	}
	return append(append(append(append(slices.Clip(stdin), 0), d.Bootstrap...), 0), d.Former...), nil
}

// environ returns the hook's environment for d, and a function that removes
// the files it wrote for the peer lists, if any.
func (h *Hook) environ(d sink.Delivery, name string, argv []string) ([]string, func()) {
	owned := []string{EnvEvent, EnvSelf, EnvSelfIP, EnvGeneration, EnvPeersAdded, EnvPeersRemoved, EnvBootstrap, EnvFormer,
		EnvPeersTruncated, EnvPeersAddedFile, EnvPeersRemovedFile}
	base := os.Environ()
	env := make([]string, 0, len(base)+len(h.cfg.Env)+len(owned))
	for _, kv := range base {
		key, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(owned, key) {
			env = append(env, kv)
		}
	}
	env = append(env, h.cfg.Env...)
	event := "change"
	if d.First {
		event = "start"
	}
	env = append(env,
		EnvEvent+"="+event,
		EnvSelf+"="+d.Self,
		EnvGeneration+"="+strconv.FormatUint(d.Generation, 10),
	)
	if self, ok := d.Set.Get(d.Self); ok && len(self.IPs) > 0 {
		env = append(env, EnvSelfIP+"="+strings.Join(self.IPs, " "))
	}
	if d.Bootstrap != "" {
		env = append(env, EnvBootstrap+"="+d.Bootstrap)
	}
	if d.Former != "" {
		env = append(env, EnvFormer+"="+d.Former)
	}
	added := EnvPeersAdded + "=" + strings.Join(d.Added, " ")
	removed := EnvPeersRemoved + "=" + strings.Join(d.Removed, " ")
	left := execLimit() - execSize(argv, env) - execMargin
	if len(added) < maxEnvList && len(removed) < maxEnvList && execSize(nil, []string{added, removed}) <= left {
		return append(env, added, removed), func() {}
	}
	env = append(env, EnvPeersTruncated+"=1")
	dir, err := writeLists(d.Added, d.Removed)
	if err != nil {
		h.log.Warn("hook peer lists too long for the environment and not written to files", "hook", name,
			"added", len(d.Added), "removed", len(d.Removed), "err", err)
		return env, func() {}
	}
	h.log.Warn("hook peer lists passed in files", "hook", name, "added", len(d.Added), "removed", len(d.Removed),
		"bytes", len(added)+len(removed), "env_bytes_left", left, "dir", dir)
	env = append(env, EnvPeersAddedFile+"="+filepath.Join(dir, "added"), EnvPeersRemovedFile+"="+filepath.Join(dir, "removed"))
	return env, func() { _ = os.RemoveAll(dir) }
}

// writeLists writes added and removed, one FQDN per line, to the files
// "added" and "removed" of a new directory under os.TempDir().
func writeLists(added, removed []string) (string, error) {
	dir, err := os.MkdirTemp("", "peer-finder-hook-")
	if err != nil {
		return "", fmt.Errorf("peer list files: %w", err)
	}
	for file, keys := range map[string][]string{"added": added, "removed": removed} {
		var b strings.Builder
		for _, k := range keys {
			b.WriteString(k)
			b.WriteByte('\n')
		}
		if err := os.WriteFile(filepath.Join(dir, file), []byte(b.String()), 0o644); err != nil {
			_ = os.RemoveAll(dir)
			return "", fmt.Errorf("peer list files: %w", err)
		}
	}
	return dir, nil
}

// execMargin is kept free of the exec limit for what execve adds (the
// file name, and for a script the interpreter's path and arguments).
const execMargin = 8 << 10

// execLimit is the kernel's limit on argv plus environment for an execve
// by this process (fs/exec.c): a quarter of RLIMIT_STACK, at most 6 MiB
// (three quarters of the 8 MiB _STK_LIM), at least 128 KiB (ARG_MAX).
func execLimit() int {
	const floor, ceiling = 128 << 10, 6 << 20
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_STACK, &rl); err != nil || rl.Cur == unix.RLIM_INFINITY || rl.Cur/4 > ceiling {
		return ceiling
	}
	return max(int(rl.Cur/4), floor)
}

// execSize is what argv and env count toward execLimit: each string with
// its NUL, and a pointer for each.
func execSize(argv, env []string) int {
	n := 0
	for _, list := range [][]string{argv, env} {
		for _, s := range list {
			n += len(s) + 1 + int(unsafe.Sizeof(uintptr(0)))
		}
	}
	return n
}
