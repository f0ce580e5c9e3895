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
	"os"
	"strings"
	"sync"
	"time"

	"github.com/flockd/flock/internal/atomicfile"
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
	// Logger receives warnings about skipped peers and debug records about
	// writes; slog.Default() when nil.
	Logger *slog.Logger
}

// DefaultKeepInterval is how often Run checks the file by default.
const DefaultKeepInterval = time.Second

// Sink writes the managed block. It implements sink.Sink.
type Sink struct {
	opts  Options
	namer *Namer
	log   *slog.Logger

	mu    sync.Mutex
	block []byte // the block of the newest Apply, which Run restores

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

// HoldsBack implements sink.Gate: only with WaitForAll does a failure of
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
	block := Block(s.opts.ID, plan)
	res, err := atomicfile.Update(ctx, s.opts.Path, s.opts.Perm, s.opts.WriteMode, func(current []byte) ([]byte, error) {
		// Set under the file's lock, so Run never writes an older block
		// over this one.
		s.mu.Lock()
		s.block = block
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
// ctx is done and writes the
// newest block again when someone else removed or changed it: the kubelet
// rewrites a pod's /etc/hosts from scratch each time one of the pod's
// containers starts, so a block written before the app container started is
// gone once it runs, and no new peer set may ever come to put it back. It
// logs each restore, and a failing restore once per distinct error.
func (s *Sink) Run(ctx context.Context) error {
	interval := s.opts.KeepInterval
	if interval <= 0 {
		interval = DefaultKeepInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var lastErr string
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		s.mu.Lock()
		block := s.block
		s.mu.Unlock()
		if block == nil {
			continue // nothing written yet
		}
		if cur, err := os.ReadFile(s.opts.Path); err == nil && bytes.Contains(cur, block) {
			continue
		}
		res, err := atomicfile.Update(ctx, s.opts.Path, s.opts.Perm, s.opts.WriteMode, func(current []byte) ([]byte, error) {
			s.mu.Lock()
			newest := s.block
			s.mu.Unlock()
			return Render(current, s.opts.ID, newest)
		})
		if err != nil {
			if ctx.Err() == nil && err.Error() != lastErr {
				s.log.Warn("hosts file: restoring the block failed", "err", err)
			}
			lastErr = err.Error()
			continue
		}
		lastErr = ""
		if res != atomicfile.Unchanged {
			s.log.Info("hosts file: block restored after the file was rewritten by someone else", "result", res)
		}
	}
}
