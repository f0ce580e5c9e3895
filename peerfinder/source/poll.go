package source

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/flockd/flock/internal/retry"
	"github.com/flockd/flock/peerfinder/peer"
)

// Poll is a Source built from a lookup function, for origins that are
// asked rather than watched (DNS, a file): it sends only on change, backs
// off while lookups fail, and logs once per state. Its Run follows the
// Source contract.
type Poll struct {
	// Lookup does one lookup. last is the set sent last (empty before the
	// first send), for lookups that fill gaps from it. An error means "no
	// news": nothing is sent and the last set stands.
	Lookup func(ctx context.Context, last peer.Set) (peer.Set, error)
	// Reason classifies a lookup error for the logs; a change of reason is a
	// new failing state. nil: every error has the reason "error".
	Reason func(error) string
	// Level is the log level of a failing state by its reason; nil: warn.
	Level func(reason string) slog.Level
	// Name is what is polled, logged as "name".
	Name string
	// Period is the pause after a successful lookup; it must be positive.
	Period time.Duration
	// Backoff gives the pause after a failed lookup from the backoff level:
	// the level rises by one per failed lookup and drops by one per
	// DecayAfter successful lookups in a row, so a flapping origin meets a
	// growing backoff instead of a fresh one each time.
	Backoff retry.Backoff
	// Logger receives the state records; nil discards them.
	Logger *slog.Logger

	// Now and Wait are the clock and the pause (test seams); nil: the real ones.
	Now  func() time.Time
	Wait func(ctx context.Context, d time.Duration) error
}

// Rate limits of Poll's state records and backoff decay.
const (
	LogGap     = 30 * time.Second // at most one failing/recovered record per LogGap
	DecayAfter = 4                // successful lookups in a row that lower the backoff level by one
	maxLevel   = 32
)

// pollState is Run's memory between lookups.
type pollState struct {
	last       peer.Set
	sent       bool
	level      int    // backoff level: +1 per failed lookup, decays on success
	healthy    int    // successful lookups in a row
	failures   int    // consecutive failed lookups
	failReason string // reason of the current failing state, "" while healthy
	failSince  time.Time
	logged     string // the state last logged: "" healthy, else the failure reason
	loggedAt   time.Time
	unlogged   int // state changes not logged since loggedAt
}

// Run polls until ctx is done: it sends the first answer, then each answer
// that differs from the last one sent; a failed lookup sends nothing and
// lengthens the pause. It logs a warning when lookups start failing, again
// when the reason changes, and an info record when they recover, at most
// one such record per LogGap: a change within LogGap of the last record is
// counted and logged, with the count, once LogGap has passed. Run returns
// nil when ctx is done.
func (p Poll) Run(ctx context.Context, up chan<- []peer.Peer) error {
	now, wait, log := p.Now, p.Wait, p.Logger
	if now == nil {
		now = time.Now
	}
	if wait == nil {
		wait = retry.Sleep
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var st pollState
	for {
		set, err := p.Lookup(ctx, st.last)
		if ctx.Err() != nil {
			return nil
		}
		p.record(ctx, log, &st, now(), set, err)
		if err == nil && (!st.sent || !set.Equal(st.last)) {
			select {
			case up <- ClonePeers(set.Peers()):
			case <-ctx.Done():
				return nil
			}
			log.Debug("peers changed", "name", p.Name, "peers", set.Len())
			st.last, st.sent = set, true
		}
		pause := p.Period
		if err != nil {
			pause = p.Backoff.Delay(st.level)
		}
		if wait(ctx, pause) != nil {
			return nil
		}
	}
}

// record updates st with the outcome of one lookup and logs a change of
// state when LogGap allows.
func (p Poll) record(ctx context.Context, log *slog.Logger, st *pollState, now time.Time, set peer.Set, err error) {
	if err != nil {
		if st.failReason == "" {
			st.failures = 0 // a new failing episode
		}
		st.failures++
		st.level = min(st.level+1, maxLevel)
		st.healthy = 0
		reason := "error"
		if p.Reason != nil {
			reason = p.Reason(err)
		}
		if reason != st.failReason {
			if st.failReason == "" {
				st.failSince = now
			}
			st.failReason = reason
			st.unlogged++
		}
	} else {
		if st.failReason != "" {
			st.unlogged++
		}
		if st.healthy++; st.healthy >= DecayAfter && st.level > 0 {
			st.level, st.healthy = st.level-1, 0
		}
	}
	state := st.failReason // what to log: "" healthy, else the failure reason
	if err == nil {
		state = ""
	}
	if state != st.logged && (st.loggedAt.IsZero() || now.Sub(st.loggedAt) >= LogGap) {
		extra := []any{"name", p.Name}
		if st.unlogged > 1 {
			extra = append(extra, "changes_since_last_record", st.unlogged)
		}
		if state != "" {
			level := slog.LevelWarn
			if p.Level != nil {
				level = p.Level(state)
			}
			log.Log(ctx, level, "lookup failing, keeping last peer set", append(extra, "reason", state, "err", err)...)
		} else {
			log.Info("lookup recovered", append(extra, "failed_lookups", st.failures,
				"failing_for", now.Sub(st.failSince).Round(time.Millisecond), "peers", set.Len())...)
		}
		st.logged, st.loggedAt, st.unlogged = state, now, 0
	}
	if err == nil {
		st.failReason = ""
	}
}

// ClonePeers deep-copies peers so the receiver may own them; never nil.
func ClonePeers(ps []peer.Peer) []peer.Peer {
	out := slices.Clone(ps)
	if out == nil {
		out = []peer.Peer{}
	}
	for i := range out {
		out[i].IPs = slices.Clone(out[i].IPs)
		out[i].Ports = slices.Clone(out[i].Ports)
	}
	return out
}
