package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/flockd/flock/peerfinder/membership"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
)

// Run runs sources, membership and sinks until ctx is done (returning nil),
// a source fails to run (returning its error), the bootstrap timeout
// expires (ErrBootstrapTimeout), or, with Once, the first set was applied by
// every sink (returning nil). Run waits for its goroutines before returning.
func (e *Engine) Run(ctx context.Context) error { return e.run(ctx, false) }

// FirstEvaluation runs the sources and the expected-size source, without
// any sink, until the first evaluation that has every input (every source
// reported and the expected size known) or until ctx ends, and leaves it in
// Status: the verdict, views and set a real run makes at that point,
// through the same code. Diagnose mode reads it. It returns a source's
// error when one cannot run, else nil (also when ctx ended first: Status
// then says what was missing).
func (e *Engine) FirstEvaluation(ctx context.Context) error { return e.run(ctx, true) }

// inputs are the latest views and expected size, as Run collects them.
type inputs struct {
	views []membership.View
	opts  membership.Options
}

// evaluator is what Run remembers between evaluations.
type evaluator struct {
	obs       membership.Observation
	published peer.Set
	previewed peer.Set
	gen       uint64
	last      membership.Verdict
}

// evaluation is what one step decides.
type evaluation struct {
	set     peer.Set
	verdict membership.Verdict
	// publish is true when set is a new generation (gen) to deliver.
	publish bool
	// preview is true when only the expected-names gate holds set and it
	// differs from the set previewed last: Previewer sinks show it.
	preview bool
	gen     uint64
	// logVerdict is true when the verdict's reason or sizes changed.
	logVerdict bool
}

// step is Run's publish-or-hold decision: membership over the inputs at
// now, then publish when the verdict allows and the set differs from the
// one published last (or nothing was published yet), or preview a set the
// verdict says may be previewed. It is pure.
func step(ev evaluator, in inputs, now time.Time) (evaluator, evaluation) {
	opts := in.opts
	opts.Published = ev.gen > 0
	set, obs, v := membership.Compute(in.views, opts, ev.obs, now)
	out := evaluation{
		set: set, verdict: v, gen: ev.gen,
		logVerdict: v.Reason != ev.last.Reason || v.Peers != ev.last.Peers || v.Need != ev.last.Need,
	}
	ev.obs, ev.last = obs, v
	if v.Publishable() && (ev.gen == 0 || !set.Equal(ev.published)) {
		ev.gen++
		ev.published = set
		out.publish, out.gen = true, ev.gen
	} else if v.Preview && !set.Equal(ev.previewed) {
		ev.previewed = set
		out.preview = true
	}
	return ev, out
}

// complete reports whether an evaluation had every input: all sources
// reported and the expected size known.
func complete(v membership.Verdict) bool {
	return v.Reason != membership.WaitSources && v.Reason != membership.WaitExpect
}

type update struct {
	source int
	peers  []peer.Peer
}

type sourceErr struct {
	source int
	err    error
}

// run is Run, or with evaluateOnly FirstEvaluation.
func (e *Engine) run(ctx context.Context, evaluateOnly bool) error {
	if len(e.cfg.Sources) == 0 {
		return errors.New("engine: no sources configured")
	}
	ctx, cancel := context.WithCancel(ctx)
	e.start = e.cfg.Now()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // runs before wg.Wait

	updates, errc := e.startSources(ctx, &wg)
	in := inputs{views: make([]membership.View, len(e.cfg.Sources)), opts: e.cfg.Membership}
	for i, s := range e.cfg.Sources {
		in.views[i].Source = s.Name
	}
	e.mu.Lock()
	e.status.Views = append([]membership.View(nil), in.views...) // none reported yet
	e.mu.Unlock()
	sizes := make(chan int)
	if e.cfg.Expect != nil {
		in.opts.ExpectPending = true
		wg.Go(func() {
			if err := e.cfg.Expect.Run(ctx, sizes); err != nil && ctx.Err() == nil {
				errc <- sourceErr{-1, err}
			}
		})
	}

	trigger := make(chan struct{}, 1)
	done := make(chan struct{})
	if !evaluateOnly {
		wg.Go(func() { e.deliver(ctx, trigger, done) })
	}
	var bootstrap <-chan time.Time
	if e.cfg.BootstrapTimeout > 0 && !evaluateOnly {
		t := e.cfg.Clock.NewTimer(e.cfg.BootstrapTimeout)
		defer t.Stop()
		bootstrap = t.C()
	}
	recheck := e.cfg.Clock.NewTimer(time.Hour)
	recheck.Stop()
	defer recheck.Stop()

	var ev evaluator
	for {
		select {
		case u := <-updates:
			in.views[u.source] = membership.View{Source: in.views[u.source].Source, Reported: true, Peers: u.peers}
			if m := e.cfg.Metrics; m != nil {
				m.snapshots.WithLabelValues(in.views[u.source].Source).Inc()
			}
		case n := <-sizes:
			if !in.opts.ExpectPending && n == in.opts.Expect {
				continue
			}
			e.cfg.Logger.Info("expected size", "peers", n, "was", in.opts.Expect)
			in.opts.Expect, in.opts.ExpectPending = n, false
		case <-recheck.C():
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

		var out evaluation
		ev, out = step(ev, in, e.cfg.Now())
		if out.logVerdict {
			e.logVerdict(out.verdict)
		}
		if d := out.verdict.RecheckAfter; d > 0 {
			recheck.Reset(d)
		}
		released := e.record(in, out)
		if evaluateOnly && complete(out.verdict) {
			return nil
		}
		if out.preview && !evaluateOnly {
			e.preview(ctx, out.set)
		}
		if out.publish || released {
			select {
			case trigger <- struct{}{}:
			default:
			}
		}
	}
}

// startSources runs every source with a forwarder that tags its snapshots.
func (e *Engine) startSources(ctx context.Context, wg *sync.WaitGroup) (<-chan update, chan sourceErr) {
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
	return updates, errc
}

// record publishes an evaluation in Status and the metrics, and a new
// generation as the delivery worker's target. It reports whether the
// evaluation released a held target (see held).
func (e *Engine) record(in inputs, out evaluation) (released bool) {
	e.mu.Lock()
	wasHeld := held(e.target, e.status.Verdict.Need)
	e.status.Verdict = out.verdict
	e.status.Generation = out.gen
	e.status.Views = append([]membership.View(nil), in.views...)
	e.status.Set = out.set
	e.status.Expect, e.status.ExpectPending = in.opts.Expect, in.opts.ExpectPending
	if out.publish {
		e.target = target{set: out.set, gen: out.gen}
	}
	released = wasHeld && !held(e.target, out.verdict.Need)
	e.mu.Unlock()
	if m := e.cfg.Metrics; m != nil {
		m.peers.Set(float64(out.set.Len()))
		m.generation.Set(float64(out.gen))
		m.verdict.Reset()
		m.verdict.WithLabelValues(string(out.verdict.Reason)).Set(1)
	}
	return released
}

// preview shows a set held by the expected-names gate to the Previewer
// sinks. It runs before the first publish, so no Apply runs meanwhile.
func (e *Engine) preview(ctx context.Context, set peer.Set) {
	for _, s := range e.cfg.Sinks {
		p, ok := s.Sink.(sink.Previewer)
		if !ok {
			continue
		}
		if err := p.Preview(ctx, sink.Delivery{Set: set, Self: e.cfg.Membership.Self}); err != nil && ctx.Err() == nil {
			e.cfg.Logger.Warn("preview failed", "sink", s.Name, "err", err)
		}
	}
}
