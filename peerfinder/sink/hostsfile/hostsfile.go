// Package hostsfile implements the hosts-file sink: it keeps a managed block
// of "IP<TAB>name" lines in an /etc/hosts-style file, between marker lines,
// and leaves every other byte of the file alone.
//
// Names come from a text/template over each peer (Member), so a multi-role
// batch job can resolve stable "<role>-<index>" names before it starts and
// keep resolving them when a pod is retried with a new IP. Names are
// validated (RFC 1123) before anything is written; a peer with an invalid
// name is logged and skipped.
//
// Expected names (ParseExpected, ExpectedFromCount) are listed as comments
// until their address is known; Sink.Missing and Plan.Complete tell whether
// every expected name has an address (init mode's -wait-for-all).
//
// Writes go through internal/atomicfile: an atomic replace, or an in-place
// rewrite for a bind-mounted target such as the kubelet's /etc/hosts; an
// unchanged file is not rewritten. The file is read, rendered and written
// under its flock(2) lock, so several peer-finders (one per -hosts-id block)
// writing one file never put back each other's stale blocks; a lock held by
// someone else for longer than atomicfile.LockWait fails the Apply. For one
// file shared by many pods, wrap the sink in sink/leader so that only the
// Lease holder writes.
package hostsfile

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flockd/flock/internal/atomicfile"
	"github.com/flockd/flock/internal/retry"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
)

// Options configure a Sink. Only Path is required.
type Options struct {
	// Path is the hosts file, e.g. /etc/hosts or a file on a shared volume.
	Path string
	// ID names the managed block, so that several peer-finders (one per
	// service) can share one file. Empty gives unnamed markers.
	ID string
	// NameTemplate makes each peer's host name; DefaultNameTemplate when
	// empty. Example: "{{.Role}}-{{.Index}}".
	NameTemplate string
	// AliasTemplates make further names on the same line, e.g. "{{.FQDN}}".
	AliasTemplates []string
	// IndexLabel, when set, is the pod label read first for Member.Index.
	IndexLabel string
	// Family selects the addresses written; all families by default.
	Family Family
	// Expected are the names that should be present (see ParseExpected).
	Expected []string
	// WriteMode selects atomic replace, in-place rewrite, or automatic
	// fallback (default) for mount points.
	WriteMode atomicfile.Mode
	// Perm is the mode of a newly created file; 0644 when zero.
	Perm fs.FileMode
	// WaitForAll says the first delivery waits until every expected name
	// has an address. The wait is membership's expected-names gate, fed by
	// Missing (peer-finder wires it), so Apply itself never fails for it;
	// here WaitForAll makes a failure of this sink hold back the later ones
	// (see HoldsBack) and makes the Follower wait for a complete file.
	WaitForAll bool
	// KeepInterval is how often Run checks that the block is still in the
	// file (DefaultKeepInterval).
	KeepInterval time.Duration
	// Writer identifies this writer in the block, on a comment line after
	// the begin marker ("# written by <Writer>"), so that another writer of
	// the same block can name it; none when empty. peer-finder sets the pod
	// (or host) name and its pid.
	Writer string
	// Metrics, when not nil, counts conflicts with another writer.
	Metrics *Metrics
	// Logger receives warnings about skipped peers and debug records about
	// writes; slog.Default() when nil.
	Logger *slog.Logger
}

// Metrics are the counters of a Sink; create them with NewMetrics.
type Metrics struct {
	// Conflicts counts the times Run found the block rewritten by another
	// writer with a different set (the same -hosts-id used twice on one
	// file).
	Conflicts prometheus.Counter
}

// NewMetrics creates the counters and registers them with reg when reg is
// not nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{Conflicts: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "flock_hosts_block_conflicts_total",
		Help: "Times the hosts file's managed block was found rewritten by another writer of the same -hosts-id with a different set.",
	})}
	if reg != nil {
		reg.MustRegister(m.Conflicts)
	}
	return m
}

// DefaultKeepInterval is how often Run checks the file by default.
const DefaultKeepInterval = time.Second

// Sink writes the managed block. It implements sink.Sink.
type Sink struct {
	opts  Options
	namer *Namer
	log   *slog.Logger

	mu      sync.Mutex
	block   []byte // the block of the newest Apply, which Run restores
	version uint64 // counts the blocks Apply set, so Run checks after each
	written []byte // the block of the last successful write
	note    string // the conflict Warnings reports, "" when none

	warned map[string]string // by kind, what Apply last warned about (Apply is never concurrent)
}

// IncompleteError says which expected names have no address yet; the
// Follower returns it, as a pending result, while the shared file lacks them.
type IncompleteError struct {
	// Missing are the expected names without an address, sorted.
	Missing []string
}

func (e *IncompleteError) Error() string {
	return fmt.Sprintf("hosts file: waiting for the addresses of %d expected names: %s", len(e.Missing), strings.Join(e.Missing, ", "))
}

var (
	_ sink.Sink   = (*Sink)(nil)
	_ sink.Runner = (*Sink)(nil)
	_ sink.Warner = (*Sink)(nil)
)

// New validates opts and returns a Sink.
func New(opts Options) (*Sink, error) {
	if opts.Path == "" {
		return nil, errors.New("hosts file: no path")
	}
	n, err := NewNamer(opts.NameTemplate, opts.AliasTemplates, opts.IndexLabel)
	if err != nil {
		return nil, err
	}
	for _, e := range opts.Expected {
		if err := ValidName(e); err != nil {
			return nil, fmt.Errorf("hosts file expected names: %w", err)
		}
	}
	if opts.Perm == 0 {
		opts.Perm = 0o644
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Sink{opts: opts, namer: n, log: log.With("sink", "hosts-file", "path", opts.Path)}, nil
}

// HoldsBack implements sink.Blocking: only with WaitForAll does a failure of
// the hosts file hold back the sinks after it (their start needs every
// expected name). Otherwise a file that cannot be written (read-only, a
// stray marker written by someone else) is retried and reported while hooks
// and the command still get the set: names also resolve through DNS.
func (s *Sink) HoldsBack() bool { return s.opts.WaitForAll }

// Plan returns what Apply would write for set. It is pure.
func (s *Sink) Plan(set peer.Set) Plan {
	return MakePlan(set, s.namer, s.opts.Family, s.opts.Expected)
}

// Missing returns the expected names that have no address in set, sorted;
// none means the file is complete. It is pure.
func (s *Sink) Missing(set peer.Set) []string { return s.Plan(set).Pending }

// Apply renders the block for d.Set into the file, once. Skipped peers are
// logged in one warning per Apply.
func (s *Sink) Apply(ctx context.Context, d sink.Delivery) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	plan := s.Plan(d.Set)
	if len(plan.Rejected) > 0 {
		s.log.Warn("hosts file: peers skipped", "count", len(plan.Rejected), "rejected", plan.Rejected)
	}
	if len(plan.Shadowed) > 0 {
		s.log.Debug("hosts file: duplicate names, one peer kept per name", "shadowed", plan.Shadowed)
	}
	if s.changed("collisions", fmt.Sprint(plan.Collisions)) && len(plan.Collisions) > 0 {
		s.log.Warn("hosts file: several peers get one host name, one line written per name",
			"name_template", cmp.Or(s.opts.NameTemplate, DefaultNameTemplate), "collisions", plan.Collisions)
	}
	if s.changed("family", strings.Join(plan.WrongFamily, ",")) && len(plan.WrongFamily) > 0 {
		s.log.Warn("hosts file: peers without an address of the chosen family get no line",
			"ip_family", s.opts.Family.String(), "count", len(plan.WrongFamily), "peers", plan.WrongFamily)
	}
	// Read, render and write under the file's lock: other peer-finders may
	// own other blocks of the same file.
	var renderErr error
	block := withWriter(Block(s.opts.ID, plan), s.opts.Writer)
	res, err := atomicfile.Update(ctx, s.opts.Path, s.opts.Perm, s.opts.WriteMode, func(current []byte) ([]byte, error) {
		// Set under the file's lock, so Run never writes an older block
		// over this one.
		s.mu.Lock()
		s.block = block
		s.version++
		s.mu.Unlock()
		out, err := Render(current, s.opts.ID, block)
		renderErr = err
		return out, err
	})
	switch {
	case renderErr != nil:
		return fmt.Errorf("hosts file %s: %w", s.opts.Path, renderErr)
	case err != nil:
		return fmt.Errorf("hosts file: %w", err)
	}
	s.mu.Lock()
	s.written = block
	s.mu.Unlock()
	s.log.Debug("hosts file applied", "result", res, "entries", len(plan.Entries), "pending", len(plan.Pending), "generation", d.Generation)
	return nil
}

// changed records what Apply is about to warn about under kind and
// reports whether it differs from the last time, so each warning comes
// once per change rather than once per Apply (retries, other sinks'
// changes).
func (s *Sink) changed(kind, what string) bool {
	if s.warned == nil {
		s.warned = map[string]string{}
	}
	old := s.warned[kind]
	s.warned[kind] = what
	return old != what
}

// Preview implements sink.Previewer: the held set is written like Apply
// writes it, so the file lists every expected name (as a comment until its
// address is known) while delivery waits for all of them.
func (s *Sink) Preview(ctx context.Context, d sink.Delivery) error { return s.Apply(ctx, d) }

// Run implements sink.Runner: it checks the file every KeepInterval until
// ctx is done and writes the newest block again when someone else removed
// or changed it: the kubelet rewrites a pod's /etc/hosts from scratch each
// time one of the pod's containers starts, so a block written before the
// app container started is gone once it runs, and no new peer set may ever
// come to put it back. It logs each restore, and a failing restore once
// per distinct error.
//
// A check costs a stat(2) while the file is as it was when last found
// right: it is read again only when its size, mtime, ctime, inode or
// device changed (or changed less than racyWindow before it was last read,
// when timestamps may not tell a rewrite apart), or after a new Apply.
//
// A block found with another set that this sink never wrote is another
// writer's with the same ID (two peer-finders configured alike on one
// shared file): Run warns once, naming the writer if the block records one
// (Options.Writer), counts it in Metrics.Conflicts, reports it in
// Warnings, and writes its block again only with a backoff (twice the
// interval, doubling, at most conflictBackoffMax) instead of at every
// check, so the two do not rewrite the file forever. The conflict ends
// when no other writer's block was seen for conflictQuiet. A block with
// the same set is no conflict, whoever wrote it.
func (s *Sink) Run(ctx context.Context) error {
	interval := s.opts.KeepInterval
	if interval <= 0 {
		interval = DefaultKeepInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var k keeper
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			s.keep(ctx, &k, now)
		}
	}
}

const (
	// racyWindow: a file changed less than this before it was read may
	// change again with the same size and timestamps (they have the
	// kernel's coarse clock), so its stat does not vouch for its content.
	racyWindow = time.Second
	// conflictBackoffMax bounds the pause between two writes of the block
	// over another writer's.
	conflictBackoffMax = time.Minute
	// conflictQuiet is how long no other writer's block must be seen for a
	// conflict to end.
	conflictQuiet = 2 * conflictBackoffMax
)

// keeper is Run's state between checks.
type keeper struct {
	seen    fileState // the file when last read, zero to read it again
	version uint64    // Sink.version then
	found   found     // what the file held then
	lastErr string    // the last restore error, logged once
	c       conflict
}

// found is what a check found in the file.
type found struct {
	kind  blockKind
	other string // kind otherWriter: the writer the block names, "" if none
}

type blockKind int

const (
	blockOurs        blockKind = iota // the newest block's set
	blockMissing                      // no block, or one that does not parse
	blockStale                        // a set this sink wrote before
	blockOtherWriter                  // a set this sink never wrote
)

// conflict is a run of checks that found another writer's block.
type conflict struct {
	active      bool
	other       string
	since, last time.Time // the first and the latest check that found it
	writes      int       // writes over it so far: the backoff's exponent
	next        time.Time // the earliest next write over it
	restored    bool      // our block was in place since it was last found
}

// Warnings implements sink.Warner: the conflict with another writer of the
// block while there is one.
func (s *Sink) Warnings() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.note == "" {
		return nil
	}
	return []string{s.note}
}

// keep is one check of Run at time now.
func (s *Sink) keep(ctx context.Context, k *keeper, now time.Time) {
	s.mu.Lock()
	block, version, written := s.block, s.version, s.written
	s.mu.Unlock()
	if block == nil {
		return // nothing written yet
	}
	st, statErr := stateOf(s.opts.Path)
	if statErr != nil || st != k.seen || version != k.version {
		cur, err := atomicfile.ReadTarget(ctx, s.opts.Path)
		k.found = s.classify(cur, err, block, written)
		k.seen, k.version = fileState{}, version
		if statErr == nil && err == nil && !st.racy(now) {
			k.seen = st
		}
		if k.found.kind == blockOtherWriter {
			s.otherWriter(k, now)
		}
	}
	switch k.found.kind {
	case blockOurs:
		if k.c.active {
			k.c.restored = true
			if now.Sub(k.c.last) >= conflictQuiet {
				k.c = conflict{}
				s.setNote("")
				s.log.Info("hosts file: no other writer of the block seen for a while, conflict over", "quiet", conflictQuiet)
			}
		}
		return
	case blockOtherWriter:
		if now.Before(k.c.next) {
			return
		}
		k.c.writes++
		k.c.next = now.Add(s.conflictBackoff().Delay(k.c.writes + 1))
	}
	res, err := atomicfile.Update(ctx, s.opts.Path, s.opts.Perm, s.opts.WriteMode, func(current []byte) ([]byte, error) {
		s.mu.Lock()
		newest := s.block
		s.mu.Unlock()
		if s.classify(current, nil, newest, nil).kind == blockOurs {
			return current, nil // the same set, perhaps by another writer: leave it
		}
		return Render(current, s.opts.ID, newest)
	})
	k.seen = fileState{} // read again at the next check
	if err != nil {
		if ctx.Err() == nil && err.Error() != k.lastErr {
			s.log.Warn("hosts file: restoring the block failed", "err", err)
		}
		k.lastErr = err.Error()
		return
	}
	k.lastErr = ""
	switch {
	case res == atomicfile.Unchanged:
	case k.found.kind == blockOtherWriter:
		s.log.Debug("hosts file: block written again over another writer's", "other_writer", k.found.other, "result", res, "next", k.c.next.Sub(now))
	default:
		s.log.Info("hosts file: block restored after the file was rewritten by someone else", "result", res)
	}
}

// classify says what content (read with err) holds in place of block,
// the newest block; written is the block of the last successful write.
func (s *Sink) classify(content []byte, err error, block, written []byte) found {
	if err != nil {
		return found{kind: blockMissing}
	}
	body, writer, ok := blockBody(content, s.opts.ID)
	ours, _, _ := blockBody(block, s.opts.ID)
	switch {
	case !ok:
		return found{kind: blockMissing}
	case bytes.Equal(body, ours):
		return found{kind: blockOurs}
	}
	if old, _, _ := blockBody(written, s.opts.ID); written != nil && bytes.Equal(body, old) {
		return found{kind: blockStale}
	}
	return found{kind: blockOtherWriter, other: writer}
}

// otherWriter records a check that found another writer's block: the
// first of a conflict, or one with a new writer, is warned about.
func (s *Sink) otherWriter(k *keeper, now time.Time) {
	other := k.found.other
	switch {
	case !k.c.active:
		k.c = conflict{active: true, since: now, next: now.Add(s.conflictBackoff().Delay(1))}
		s.countConflict()
	case k.c.restored:
		s.countConflict()
	}
	if other != k.c.other || k.c.last.IsZero() {
		shown := cmp.Or(other, "not recorded")
		s.log.Warn("hosts file: the block was rewritten by another writer with a different set; writing it again with backoff",
			"id", s.opts.ID, "other_writer", shown, "max_backoff", conflictBackoffMax)
	}
	k.c.other, k.c.last, k.c.restored = other, now, false
	s.setNote(fmt.Sprintf("hosts file %s: block %q rewritten by another writer (%s) with a different set since %s; written again with backoff",
		s.opts.Path, s.opts.ID, cmp.Or(other, "not recorded"), k.c.since.UTC().Format(time.RFC3339)))
}

func (s *Sink) countConflict() {
	if s.opts.Metrics != nil {
		s.opts.Metrics.Conflicts.Inc()
	}
}

func (s *Sink) setNote(note string) {
	s.mu.Lock()
	s.note = note
	s.mu.Unlock()
}

// conflictBackoff is the pause between writes over another writer's block.
func (s *Sink) conflictBackoff() retry.Backoff {
	interval := cmp.Or(s.opts.KeepInterval, DefaultKeepInterval)
	return retry.Backoff{Min: 2 * interval, Max: conflictBackoffMax}
}
