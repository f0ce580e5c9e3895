package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/flockd/flock/internal/retry"
	"github.com/flockd/flock/peerfinder/events"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
)

type sinkState struct {
	applied bool
	set     peer.Set
	gen     uint64
}

// roundOutcome is how a delivery round ended.
type roundOutcome int

const (
	delivered roundOutcome = iota // every sink applied the target
	pending                       // only pending results held it (sink.PendingError)
	failed                        // a sink or the role failed
)

// afterRound is the delivery worker's pure decision once a round ended with
// err (nil: every sink applied it): the outcome, the failed rounds in a row
// afterwards, and the pause before the next round (0: none until the next
// trigger). A pending round is re-checked at sink.PendingInterval and
// counts no failure; a failed one backs off by b.
func afterRound(err error, failures int, b retry.Backoff) (roundOutcome, int, time.Duration) {
	switch {
	case err == nil:
		return delivered, 0, 0
	case onlyPending(err):
		return pending, failures, sink.PendingInterval
	}
	return failed, failures + 1, b.Delay(failures + 1)
}

// deliver is the delivery worker: on each trigger or retry it brings every
// sink, in order, to the newest published set (applyRound) and decides
// what next (afterRound). It closes done when Once is set and the first
// set has been applied everywhere.
func (e *Engine) deliver(ctx context.Context, trigger <-chan struct{}, done chan<- struct{}) {
	log := e.cfg.Logger
	states := make([]sinkState, len(e.cfg.Sinks))
	retryTimer := e.cfg.Clock.NewTimer(time.Hour)
	retryTimer.Stop()
	defer retryTimer.Stop()
	b := retry.Backoff{Min: e.cfg.RetryMin, Max: e.cfg.RetryMax}
	var (
		failures int
		roleGen  uint64
		role     string
		former   string
		holding  bool
	)
	for {
		select {
		case <-trigger:
		case <-retryTimer.C():
		case <-ctx.Done():
			return
		}
		e.mu.Lock()
		t, need := e.target, e.status.Verdict.Need
		e.mu.Unlock()
		if t.gen == 0 {
			continue
		}
		if held(t, need) {
			if !holding {
				e.setHeld(true)
				log.Info("delivery held: the expected size outgrew the set", "generation", t.gen, "peers", t.set.Len(), "need", need)
			}
			holding = true
			continue // record triggers again when a set passes or need shrinks
		}
		if holding {
			e.setHeld(false)
		}
		holding = false
		if applied(states, t.gen) {
			continue // a released target that was delivered before the hold
		}
		var err error
		if e.cfg.Role != nil && roleGen != t.gen {
			var r, f string
			if r, f, err = e.cfg.Role(ctx, t.set, e.cfg.Membership.Self); err == nil {
				role, former, roleGen = r, f, t.gen
			} else {
				err = fmt.Errorf("bootstrap role: %w", err)
			}
			e.roleResult(err)
		}
		if err == nil {
			err = e.applyRound(ctx, states, t, role, former)
		}
		if ctx.Err() != nil {
			return
		}
		outcome, after, wait := afterRound(err, failures, b)
		switch outcome {
		case pending:
			log.Debug("delivery pending, will check again", "generation", t.gen, "retry_in", wait, "err", err)
			retryTimer.Reset(wait)
			continue
		case failed:
			level := slog.LevelDebug // each sink's change of state is logged by sinkResult
			if after == 1 {
				level = slog.LevelWarn
			}
			log.Log(ctx, level, "delivery failed, will retry with the newest set", "generation", t.gen, "attempt", after, "retry_in", wait.Round(time.Millisecond), "err", err)
			failures = after
			retryTimer.Reset(wait)
			continue
		}
		if failures > 0 {
			log.Info("delivery recovered", "generation", t.gen, "attempts", failures+1)
		}
		failures = 0
		retryTimer.Stop()
		if e.delivered(t, role, former) && e.cfg.Once {
			close(done)
			return
		}
	}
}

// applied reports whether there are sinks and every one applied generation
// gen.
func applied(states []sinkState, gen uint64) bool {
	if len(states) == 0 {
		return false
	}
	for _, st := range states {
		if !st.applied || st.gen != gen {
			return false
		}
	}
	return true
}

// applyRound applies t to every sink that has not applied it yet, in order.
// A failing sink that holds back the later ones ends the round; the
// others' failures are joined.
func (e *Engine) applyRound(ctx context.Context, states []sinkState, t target, role, former string) error {
	var errs []error
	for i, s := range e.cfg.Sinks {
		st := &states[i]
		if st.applied && st.gen == t.gen {
			continue
		}
		added, removed := peer.Diff(st.set, t.set)
		d := sink.Delivery{
			Set: t.set, Self: e.cfg.Membership.Self, Generation: t.gen, First: !st.applied,
			Added: added, Removed: removed, Bootstrap: role, Former: former,
		}
		began := e.cfg.Now()
		err := s.Sink.Apply(ctx, d)
		if m := e.cfg.Metrics; m != nil {
			m.applyDuration.WithLabelValues(s.Name).Observe(e.cfg.Now().Sub(began).Seconds())
			m.applies.WithLabelValues(s.Name, result(err)).Inc()
		}
		if ctx.Err() == nil {
			e.sinkResult(i, err)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("sink %s: %w", s.Name, err))
			if holdsBack(s.Sink) {
				break
			}
			continue // later sinks do not need this one
		}
		*st = sinkState{applied: true, set: t.set, gen: t.gen}
	}
	return errors.Join(errs...)
}

// setHeld records in Status whether a published set is held back.
func (e *Engine) setHeld(held bool) {
	e.mu.Lock()
	e.status.Held = held
	e.mu.Unlock()
}

// roleResult records in Status the outcome of computing the bootstrap role
// (nil: a role was computed).
func (e *Engine) roleResult(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.status.RoleErr, e.status.RolePending = "", false
	if err != nil {
		e.status.RoleErr, e.status.RolePending = err.Error(), sink.IsPending(err)
	}
}

// delivered records that every sink applied t with role and former and
// reports whether it was the first delivery.
func (e *Engine) delivered(t target, role, former string) bool {
	first := false
	e.mu.Lock()
	if !e.status.Delivered {
		e.status.Delivered, first = true, true
	}
	e.status.Last = Delivery{Set: t.set, Generation: t.gen, Role: role, Former: former, At: e.cfg.Now()}
	e.mu.Unlock()
	e.cfg.Logger.Info("peers delivered", "generation", t.gen, "peers", t.set.Len(), "role", role)
	if first {
		e.cfg.Events.Emit(events.PeersDelivered(t.set.Len(), t.gen, role))
		if m := e.cfg.Metrics; m != nil {
			m.firstDelivery.Set(e.cfg.Now().Sub(e.start).Seconds())
		}
	}
	return first
}
