// Package engine runs flock's pipeline: it fans in the snapshots of every
// source, asks membership whether to publish, and fans the published set out
// to the sinks in order, retrying failed sinks with backoff and always with
// the newest set.
//
// Sinks are applied in the order given, never concurrently. A sink receives a
// set only after every sink before it applied that set, so files are written
// before on-start runs, and on-start succeeds before the main process starts.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/flockd/flock/internal/retry"
	"github.com/flockd/flock/peerfinder/membership"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
	"github.com/flockd/flock/peerfinder/source"
)

// ErrBootstrapTimeout is returned by Run when no set was delivered within
// Config.BootstrapTimeout.
var ErrBootstrapTimeout = errors.New("bootstrap timeout: no peer set was delivered in time")

// NamedSource is a source and the name used in logs, metrics and verdicts.
type NamedSource struct {
	Name   string
	Source source.Source
}

// NamedSink is a sink and the name used in logs and metrics.
type NamedSink struct {
	Name string
	Sink sink.Sink
}

// SizeSource reports the expected number of members, e.g. the owning
// StatefulSet's spec.replicas, for the membership size gate.
//
// Run sends the current size as soon as it is known and again whenever it
// changes; while it cannot tell (a failed lookup) it sends nothing and the
// engine keeps the last size. Until the first size arrives the size gate
// holds (membership.WaitExpect). Run blocks until ctx is done, never closes
// up, and returns nil on cancellation or an error when it cannot run at all.
type SizeSource interface {
	Run(ctx context.Context, up chan<- int) error
}

// RoleFunc returns the bootstrap role ("form", "join" or "") for a set about
// to be delivered. An error is retried like a failed sink.
type RoleFunc func(ctx context.Context, set peer.Set, self string) (string, error)

// Config configures an Engine. Sources and Sinks are required.
type Config struct {
	Sources    []NamedSource
	Sinks      []NamedSink
	Membership membership.Options
	// Expect, when set, overrides Membership.Expect with the sizes it
	// reports (and holds delivery until the first one).
	Expect SizeSource
	// Once makes Run return nil as soon as every sink applied the first set
	// (init-container mode).
	Once bool
	// BootstrapTimeout, when positive, makes Run return ErrBootstrapTimeout
	// if the first set was not applied by every sink in time.
	BootstrapTimeout time.Duration
	// RetryMin and RetryMax bound the exponential backoff (retry.Backoff:
	// equal jitter) between attempts of a failing sink. Defaults: 500ms
	// and 30s.
	RetryMin, RetryMax time.Duration
	// Role computes the bootstrap role passed to sinks. Nil: no role.
	Role    RoleFunc
	Logger  *slog.Logger
	Metrics *Metrics
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Status is a snapshot of the engine's state, safe to read concurrently.
type Status struct {
	// Verdict is the latest membership verdict.
	Verdict membership.Verdict
	// Generation is the latest published generation (0: none yet).
	Generation uint64
	// Delivered is true once every sink applied a set.
	Delivered bool
	// Views are the sources' latest snapshots.
	Views []membership.View
	// Sinks are the sinks' states, in delivery order.
	Sinks []SinkStatus
}

// SinkStatus is one sink's state.
type SinkStatus struct {
	Name string
	// Failing is true while the sink's last Apply failed; Pending while it
	// returned a pending result (sink.PendingError: waiting, not failing).
	// Err says why.
	Failing, Pending bool
	Err              string
	// HoldsBack tells whether a failure of this sink holds back the sinks
	// after it (see sink.Gate).
	HoldsBack bool
}

// Engine runs the pipeline. Create it with New and call Run once.
type Engine struct {
	cfg   Config
	start time.Time

	mu     sync.Mutex
	status Status
	target target // newest published set, read by the delivery worker
}

type target struct {
	set peer.Set
	gen uint64
}

// New returns an engine for cfg, filling in defaults.
func New(cfg Config) *Engine {
	if cfg.RetryMin <= 0 {
		cfg.RetryMin = 500 * time.Millisecond
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	e := &Engine{cfg: cfg}
	for _, s := range cfg.Sinks {
		e.status.Sinks = append(e.status.Sinks, SinkStatus{Name: s.Name, HoldsBack: holdsBack(s.Sink)})
	}
	return e
}

// Status returns the engine's current state.
func (e *Engine) Status() Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.status
	st.Sinks = slices.Clone(st.Sinks)
	return st
}

type update struct {
	source int
	peers  []peer.Peer
}

type sourceErr struct {
	source int
	err    error
}

// Run runs sources, membership and sinks until ctx is done (returning nil),
// a source fails to run (returning its error), the bootstrap timeout
// expires (ErrBootstrapTimeout), or, with Once, the first set was applied by
// every sink (returning nil). Run waits for its goroutines before returning.
func (e *Engine) Run(ctx context.Context) error {
	if len(e.cfg.Sources) == 0 {
		return errors.New("engine: no sources configured")
	}
	ctx, cancel := context.WithCancel(ctx)
	e.start = e.cfg.Now()

	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // runs before wg.Wait

	updates := make(chan update)
	errc := make(chan sourceErr, len(e.cfg.Sources)+1)
	for i, s := range e.cfg.Sources {
		ch := make(chan []peer.Peer)
		wg.Go(func() {
			if err := s.Source.Run(ctx, ch); err != nil && ctx.Err() == nil {
				errc <- sourceErr{i, err}
			}
		})
		wg.Go(func() {
			for {
				select {
				case ps := <-ch:
					select {
					case updates <- update{i, ps}:
					case <-ctx.Done():
						return
					}
				case <-ctx.Done():
					return
				}
			}
		})
	}

	opts := e.cfg.Membership
	sizes := make(chan int)
	if e.cfg.Expect != nil {
		opts.ExpectPending = true
		wg.Go(func() {
			if err := e.cfg.Expect.Run(ctx, sizes); err != nil && ctx.Err() == nil {
				errc <- sourceErr{-1, err}
			}
		})
	}

	trigger := make(chan struct{}, 1)
	done := make(chan struct{})
	wg.Go(func() { e.deliver(ctx, trigger, done) })

	var bootstrap <-chan time.Time
	if e.cfg.BootstrapTimeout > 0 {
		t := time.NewTimer(e.cfg.BootstrapTimeout)
		defer t.Stop()
		bootstrap = t.C
	}
	recheck := time.NewTimer(time.Hour)
	recheck.Stop()
	defer recheck.Stop()

	views := make([]membership.View, len(e.cfg.Sources))
	for i, s := range e.cfg.Sources {
		views[i].Source = s.Name
	}
	var (
		obs       membership.Observation
		published peer.Set
		gen       uint64
		last      membership.Verdict
	)
	for {
		select {
		case u := <-updates:
			views[u.source] = membership.View{Source: views[u.source].Source, Reported: true, Peers: u.peers}
			if m := e.cfg.Metrics; m != nil {
				m.snapshots.WithLabelValues(views[u.source].Source).Inc()
			}
		case n := <-sizes:
			if !opts.ExpectPending && n == opts.Expect {
				continue
			}
			e.cfg.Logger.Info("expected size", "peers", n, "was", opts.Expect)
			opts.Expect, opts.ExpectPending = n, false
		case <-recheck.C:
		case se := <-errc:
			if se.source < 0 {
				return fmt.Errorf("expected size: %w", se.err)
			}
			return fmt.Errorf("source %s: %w", e.cfg.Sources[se.source].Name, se.err)
		case <-bootstrap:
			if !e.Status().Delivered {
				return ErrBootstrapTimeout
			}
			bootstrap = nil
			continue
		case <-done:
			return nil
		case <-ctx.Done():
			return nil
		}

		if gen > 0 {
			opts.Missing = nil // the expected-names gate holds the first publish only
		}
		set, o, v := membership.Compute(views, opts, obs, e.cfg.Now())
		obs = o
		if v.Reason != last.Reason || v.Peers != last.Peers || v.Need != last.Need {
			e.logVerdict(v)
		}
		last = v
		if v.RecheckAfter > 0 {
			recheck.Reset(v.RecheckAfter)
		}
		publish := v.Publishable() && (gen == 0 || !set.Equal(published))
		if publish {
			gen++
			published = set
		}
		e.mu.Lock()
		e.status.Verdict = v
		e.status.Generation = gen
		e.status.Views = append([]membership.View(nil), views...)
		if publish {
			e.target = target{set: set, gen: gen}
		}
		e.mu.Unlock()
		if m := e.cfg.Metrics; m != nil {
			m.peers.Set(float64(set.Len()))
			m.generation.Set(float64(gen))
			m.verdict.Reset()
			m.verdict.WithLabelValues(string(v.Reason)).Set(1)
		}
		if publish {
			select {
			case trigger <- struct{}{}:
			default:
			}
		}
	}
}

func (e *Engine) logVerdict(v membership.Verdict) {
	if v.Publishable() {
		e.cfg.Logger.Info("peer set ready", "peers", v.Peers)
		return
	}
	e.cfg.Logger.Info("waiting before delivery", "reason", v.Reason, "detail", v.Detail, "peers", v.Peers, "need", v.Need)
}

// holdsBack reports whether a failure of s holds back the sinks after it:
// yes unless s implements sink.Gate and says no.
func holdsBack(s sink.Sink) bool {
	if g, ok := s.(sink.Gate); ok {
		return g.HoldsBack()
	}
	return true
}

// sinkResult records the outcome of sink i's Apply in Status and metrics and
// logs one record when the sink starts failing or waiting, fails or waits
// for a new reason, or recovers. A pending result is logged at info level.
func (e *Engine) sinkResult(i int, err error) {
	name := e.cfg.Sinks[i].Name
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	pending := sink.IsPending(err)
	e.mu.Lock()
	st := &e.status.Sinks[i]
	wasFailing, wasPending, wasErr := st.Failing, st.Pending, st.Err
	st.Failing, st.Pending, st.Err = err != nil && !pending, pending, msg
	e.mu.Unlock()
	if m := e.cfg.Metrics; m != nil {
		v := 0.0
		if err != nil && !pending {
			v = 1
		}
		m.sinkFailing.WithLabelValues(name).Set(v)
	}
	switch {
	case pending && (!wasPending || wasErr != msg):
		e.cfg.Logger.Info("sink waiting", "sink", name, "holds_back_later_sinks", st.HoldsBack, "for", err)
	case err != nil && !pending && (!wasFailing || wasErr != msg):
		e.cfg.Logger.Warn("sink failing", "sink", name, "holds_back_later_sinks", st.HoldsBack, "err", err)
	case err == nil && wasFailing:
		e.cfg.Logger.Info("sink recovered", "sink", name)
	case err == nil && wasPending:
		e.cfg.Logger.Info("sink done waiting", "sink", name)
	}
}

type sinkState struct {
	applied bool
	set     peer.Set
	gen     uint64
}

// deliver is the delivery worker: on each trigger or retry it brings every
// sink, in order, to the newest published set. It closes done when Once is
// set and the first set has been applied everywhere.
func (e *Engine) deliver(ctx context.Context, trigger <-chan struct{}, done chan<- struct{}) {
	log := e.cfg.Logger
	states := make([]sinkState, len(e.cfg.Sinks))
	retryTimer := time.NewTimer(time.Hour)
	retryTimer.Stop()
	defer retryTimer.Stop()
	var (
		failures int
		roleGen  uint64
		role     string
	)
	for {
		select {
		case <-trigger:
		case <-retryTimer.C:
		case <-ctx.Done():
			return
		}
		e.mu.Lock()
		t := e.target
		e.mu.Unlock()
		if t.gen == 0 {
			continue
		}
		err := func() error {
			var failed []error
			if e.cfg.Role != nil && roleGen != t.gen {
				r, err := e.cfg.Role(ctx, t.set, e.cfg.Membership.Self)
				if err != nil {
					return fmt.Errorf("bootstrap role: %w", err)
				}
				role, roleGen = r, t.gen
			}
			for i, s := range e.cfg.Sinks {
				st := &states[i]
				if st.applied && st.gen == t.gen {
					continue
				}
				added, removed := peer.Diff(st.set, t.set)
				d := sink.Delivery{
					Set: t.set, Self: e.cfg.Membership.Self, Generation: t.gen, First: !st.applied,
					Added: added, Removed: removed, Bootstrap: role,
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
					failed = append(failed, fmt.Errorf("sink %s: %w", s.Name, err))
					if holdsBack(s.Sink) {
						break
					}
					continue // later sinks do not need this one
				}
				*st = sinkState{applied: true, set: t.set, gen: t.gen}
			}
			return errors.Join(failed...)
		}()
		if ctx.Err() != nil {
			return
		}
		if err != nil && onlyPending(err) {
			log.Debug("delivery pending, will check again", "generation", t.gen, "retry_in", sink.PendingInterval, "err", err)
			retryTimer.Reset(sink.PendingInterval)
			continue
		}
		if err != nil {
			failures++
			wait := retry.Backoff{Min: e.cfg.RetryMin, Max: e.cfg.RetryMax}.Delay(failures)
			level := slog.LevelDebug // each sink's change of state is logged by sinkResult
			if failures == 1 {
				level = slog.LevelWarn
			}
			log.Log(ctx, level, "delivery failed, will retry with the newest set", "generation", t.gen, "attempt", failures, "retry_in", wait.Round(time.Millisecond), "err", err)
			retryTimer.Reset(wait)
			continue
		}
		if failures > 0 {
			log.Info("delivery recovered", "generation", t.gen, "attempts", failures+1)
		}
		failures = 0
		retryTimer.Stop()
		first := false
		e.mu.Lock()
		if !e.status.Delivered {
			e.status.Delivered, first = true, true
		}
		e.mu.Unlock()
		log.Info("peers delivered", "generation", t.gen, "peers", t.set.Len(), "role", role)
		if first {
			if m := e.cfg.Metrics; m != nil {
				m.firstDelivery.Set(e.cfg.Now().Sub(e.start).Seconds())
			}
			if e.cfg.Once {
				close(done)
				return
			}
		}
	}
}

func result(err error) string {
	switch {
	case sink.IsPending(err):
		return "pending"
	case err != nil:
		return "failure"
	}
	return "success"
}

// onlyPending reports whether every error joined in err is a pending result.
func onlyPending(err error) bool {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !sink.IsPending(e) {
				return false
			}
		}
		return true
	}
	return sink.IsPending(err)
}
