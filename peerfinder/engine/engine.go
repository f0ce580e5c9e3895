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
	"log/slog"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/flockd/flock/peerfinder/events"
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
// to be delivered, and the key of the member that formed or forms (""
// when unknown). An error is retried like a failed sink.
type RoleFunc func(ctx context.Context, set peer.Set, self string) (role, former string, err error)

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
	// Events is told of the first delivery and of a sink failing and
	// recovering (events.PeersDelivered, SinkFailing, SinkRecovered); nil:
	// none.
	Events events.Emitter
	// Clock makes the timers (bootstrap timeout, stable-for recheck, sink
	// retries) and, unless Now is set, tells the time; nil: the real clock.
	// Tests inject k8s.io/utils/clock/testing's FakeClock.
	Clock clock.Clock
	// Now is the clock's time; nil means Clock.Now.
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
	// Views are the sources' latest snapshots, and Set their merge as the
	// latest evaluation saw it.
	Views []membership.View
	Set   peer.Set
	// Expect is the expected size the latest evaluation used (0: none),
	// ExpectPending true while it was still unknown.
	Expect        int
	ExpectPending bool
	// Sinks are the sinks' states, in delivery order.
	Sinks []SinkStatus
	// Last is the set every sink applied last, with its role (Generation
	// 0: none yet).
	Last Delivery
	// Held is true while a published set is held back because the
	// expected size outgrew it (membership.Outgrown).
	Held bool
	// RoleErr is why the bootstrap role (Config.Role) of the newest set is
	// not known, RolePending true when that is a pending result (not a
	// failure); both clear once a role is computed.
	RoleErr     string
	RolePending bool
}

// Delivery is a set that every sink applied, with the bootstrap role and
// former they were given.
type Delivery struct {
	Set          peer.Set
	Generation   uint64
	Role, Former string
	// At is when the last sink applied it.
	At time.Time
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
	// after it (see sink.Blocking).
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

// held reports whether t, once published, is now held back from its sinks
// (membership.Outgrown).
func held(t target, need int) bool { return t.gen > 0 && membership.Outgrown(t.set, need) }

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
	cfg.Events = events.OrNop(cfg.Events)
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Now == nil {
		cfg.Now = cfg.Clock.Now
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

func (e *Engine) logVerdict(v membership.Verdict) {
	if v.Publishable() {
		e.cfg.Logger.Info("peer set ready", "peers", v.Peers)
		return
	}
	e.cfg.Logger.Info("waiting before delivery", "reason", v.Reason, "detail", v.Detail, "peers", v.Peers, "need", v.Need)
}

// holdsBack reports whether a failure of s holds back the sinks after it:
// yes unless s implements sink.Blocking and says no.
func holdsBack(s sink.Sink) bool {
	if g, ok := s.(sink.Blocking); ok {
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
		e.cfg.Events.Emit(events.SinkFailing(name, err))
	case err == nil && wasFailing:
		e.cfg.Logger.Info("sink recovered", "sink", name)
		e.cfg.Events.Emit(events.SinkRecovered(name))
	case err == nil && wasPending:
		e.cfg.Logger.Info("sink done waiting", "sink", name)
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
