// Package leader wraps a sink so that only the holder of a Kubernetes Lease
// applies it: "many pods, one writer" for a file on a shared volume (the
// octopus seed's NFS hosts file).
//
// Every pod runs the same wrapped sink and receives every delivery. The
// wrapper remembers the newest delivery; while this pod holds the Lease
// (leader election on a coordination.k8s.io Lease with client-go's
// semantics, see election.go) it applies
// deliveries to the inner sink as they come, and when it becomes the leader
// it first applies the newest one it has, retrying with backoff until that
// succeeds or leadership is lost. While another pod leads, Apply only
// records the delivery and succeeds.
//
// The wrapper keeps the inner sink's optional capabilities, for the holder
// only: a sink.Previewer's Preview (the hosts file listing expected names
// before they resolve), a sink.Runner's Run (the hosts file restoring its
// block after someone rewrote the file), which runs while this pod leads
// and stops when leadership ends, and a sink.Warner's Warnings.
//
// Leader election bounds, but cannot rule out, a short overlap when a leader
// is partitioned from the API server: it stops writing once it failed to
// renew for RenewDeadline, while others take over only after LeaseDuration.
// Inner sinks must therefore write whole files atomically (the file sinks
// do), so that any overlap produces complete files, each from one writer,
// and the newest writer's view wins once the old one has stepped down.
package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/flockd/flock/internal/kube"
	"github.com/flockd/flock/internal/retry"
	"github.com/flockd/flock/peerfinder/sink"
)

// Config configures a Sink. Inner, Client, Namespace and Name are required.
type Config struct {
	// Inner is the sink applied only while leading.
	Inner sink.Sink
	// Client reaches the API server (coordination.k8s.io Leases: get,
	// create, update in Namespace).
	Client *kube.Client
	// Namespace and Name identify the Lease.
	Namespace, Name string
	// Follow, when set, is applied instead of Inner while this candidate
	// does not lead, and its error is Apply's: e.g. a check that the file
	// the leader writes is complete, so that an init-mode follower waits
	// for the leader's write as the leader waits for the addresses. Nil:
	// Apply succeeds while following.
	Follow sink.Sink
	// Identity names this candidate in the Lease; hostname plus a random
	// suffix when empty.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod are the leader election
	// timings of client-go's leaderelection; 15s, 10s and 2s when zero
	// (client-go's defaults for controllers).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Logger receives leadership changes; slog.Default() when nil.
	Logger *slog.Logger
}

// Sink applies Inner only while holding the Lease. It implements sink.Sink;
// Run must be running for it ever to lead.
type Sink struct {
	cfg Config
	log *slog.Logger

	applyMu sync.Mutex // serialises Inner.Apply

	mu      sync.Mutex
	latest  *sink.Delivery
	dirty   bool            // latest not yet applied by Inner while leading
	preview *sink.Delivery  // newest held set previewed, before any Apply
	shown   bool            // preview shown by Inner while leading
	leading context.Context // non-nil while leading; done when leadership ends
	kick    chan struct{}
}

var (
	_ sink.Sink      = (*Sink)(nil)
	_ sink.Runner    = (*Sink)(nil)
	_ sink.Previewer = (*Sink)(nil)
	_ sink.Warner    = (*Sink)(nil)
)

// New validates cfg and returns a Sink.
func New(cfg Config) (*Sink, error) {
	switch {
	case cfg.Inner == nil:
		return nil, errors.New("leader: no inner sink")
	case cfg.Client == nil:
		return nil, errors.New("leader: no Kubernetes client")
	case cfg.Namespace == "" || cfg.Name == "":
		return nil, errors.New("leader: Lease namespace and name are required")
	}
	if cfg.Identity == "" {
		host, _ := os.Hostname()
		cfg.Identity = host + "_" + uuid.NewString()
	}
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration = 15 * time.Second
	}
	if cfg.RenewDeadline == 0 {
		cfg.RenewDeadline = 10 * time.Second
	}
	if cfg.RetryPeriod == 0 {
		cfg.RetryPeriod = 2 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Sink{
		cfg:  cfg,
		log:  log.With("lease", cfg.Namespace+"/"+cfg.Name, "identity", cfg.Identity),
		kick: make(chan struct{}, 1),
	}, nil
}

// Identity returns the candidate identity written into the Lease.
func (s *Sink) Identity() string { return s.cfg.Identity }

// Leading reports whether this candidate currently holds the Lease.
func (s *Sink) Leading() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leading != nil && s.leading.Err() == nil
}

// HoldsBack forwards Inner's sink.Blocking decision (holding back when Inner
// does not implement it).
func (s *Sink) HoldsBack() bool {
	if g, ok := s.cfg.Inner.(sink.Blocking); ok {
		return g.HoldsBack()
	}
	return true
}

// Warnings implements sink.Warner: Inner's warnings while leading (its
// Runner runs only then), none otherwise or when Inner is no sink.Warner.
func (s *Sink) Warnings() []string {
	w, ok := s.cfg.Inner.(sink.Warner)
	if !ok || !s.Leading() {
		return nil
	}
	return w.Warnings()
}

// Preview implements sink.Previewer when Inner does (nil otherwise): while
// leading it previews d through Inner; while following it records d, and a
// candidate that takes over before any Apply previews the newest one.
func (s *Sink) Preview(ctx context.Context, d sink.Delivery) error {
	p, ok := s.cfg.Inner.(sink.Previewer)
	if !ok {
		return nil
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	s.mu.Lock()
	s.preview, s.shown = &d, false
	lead := s.leading
	s.mu.Unlock()
	if lead == nil || lead.Err() != nil {
		return nil
	}
	return s.previewLocked(ctx, p, &d)
}

// previewLocked previews d through p; applyMu must be held.
func (s *Sink) previewLocked(ctx context.Context, p sink.Previewer, d *sink.Delivery) error {
	if err := p.Preview(ctx, *d); err != nil {
		return fmt.Errorf("leader %s: %w", s.cfg.Identity, err)
	}
	s.mu.Lock()
	s.shown = s.shown || s.preview == d
	s.mu.Unlock()
	return nil
}

// Apply records d as the newest delivery and, while leading, applies it to
// Inner (returning Inner's error). While not leading it returns Follow's
// result, nil without Follow.
func (s *Sink) Apply(ctx context.Context, d sink.Delivery) error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	s.mu.Lock()
	s.latest, s.dirty = &d, true
	lead := s.leading
	s.mu.Unlock()
	if lead == nil || lead.Err() != nil {
		if s.cfg.Follow != nil {
			if err := s.cfg.Follow.Apply(ctx, d); err != nil {
				return fmt.Errorf("leader %s (following): %w", s.cfg.Identity, err)
			}
		}
		return nil
	}
	return s.applyLocked(ctx, d)
}

// applyLocked applies d to Inner; applyMu must be held.
func (s *Sink) applyLocked(ctx context.Context, d sink.Delivery) error {
	if err := s.cfg.Inner.Apply(ctx, d); err != nil {
		return fmt.Errorf("leader %s: %w", s.cfg.Identity, err)
	}
	s.mu.Lock()
	if s.latest != nil && s.latest.Generation == d.Generation {
		s.dirty = false
	}
	s.mu.Unlock()
	return nil
}

// Run implements sink.Runner: it campaigns for the Lease until ctx is done,
// campaigning again whenever leadership is lost, and releases the Lease on
// return. While leading it runs Inner's Run, if Inner is a sink.Runner, with
// a context that ends with leadership; an error Inner's Run returns while
// still leading ends Run with that error (the pipeline's outcome, as
// without the wrapper). Otherwise Run returns nil once ctx is done.
func (s *Sink) Run(ctx context.Context) error {
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	e := &elector{
		leases: s.cfg.Client.Leases(s.cfg.Namespace), namespace: s.cfg.Namespace, name: s.cfg.Name, identity: s.cfg.Identity,
		leaseDuration: s.cfg.LeaseDuration, renewDeadline: s.cfg.RenewDeadline, retryPeriod: s.cfg.RetryPeriod, now: time.Now,
	}
	inner, _ := s.cfg.Inner.(sink.Runner)
	var innerErr error
	var innerDone chan struct{} // Inner's Run of the current term
	started := func(lctx context.Context) {
		s.mu.Lock()
		s.leading = lctx
		s.mu.Unlock()
		s.log.Info("leader: started leading")
		s.poke()
		if inner == nil {
			return
		}
		innerDone = make(chan struct{})
		go func(done chan struct{}) {
			defer close(done)
			if err := inner.Run(lctx); err != nil && lctx.Err() == nil {
				innerErr = err // read after done is closed
				stop(err)
			}
		}(innerDone)
	}
	stopped := func() {
		if innerDone != nil {
			<-innerDone // stop writing before the Lease can move
			innerDone = nil
		}
		s.mu.Lock()
		was := s.leading != nil
		s.leading = nil
		s.mu.Unlock()
		if was {
			s.log.Info("leader: stopped leading")
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { s.catchUp(ctx) })
	for ctx.Err() == nil {
		e.campaign(ctx, started, stopped) // returns when ctx is done or leadership was lost
	}
	wg.Wait()
	return innerErr
}

func (s *Sink) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// catchUp applies the newest delivery whenever this candidate has become the
// leader and Inner has not applied it yet, retrying with backoff.
func (s *Sink) catchUp(ctx context.Context) {
	b := retry.Backoff{Min: 100 * time.Millisecond, Max: 10 * time.Second}
	failures := 0
	var retryAfter <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		case <-retryAfter:
		}
		retryAfter = nil
		s.applyMu.Lock()
		s.mu.Lock()
		lead, d, dirty := s.leading, s.latest, s.dirty
		pd, shown := s.preview, s.shown
		s.mu.Unlock()
		p, previews := s.cfg.Inner.(sink.Previewer)
		var err error
		switch {
		case lead == nil || lead.Err() != nil:
			failures = 0
		case d != nil && dirty:
			if err = s.applyLocked(lead, *d); err == nil {
				s.log.Info("leader: newest set applied on taking over", "generation", d.Generation)
			}
		case d == nil && pd != nil && !shown && previews:
			// Held by the expected-names gate: nothing applied yet.
			if err = s.previewLocked(lead, p, pd); err == nil {
				s.log.Info("leader: newest held set previewed on taking over")
			}
		}
		s.applyMu.Unlock()
		if err == nil {
			failures = 0
			continue
		}
		failures++
		wait := b.Delay(failures)
		s.log.Warn("leader: apply on taking over failed", "err", err, "retry_in", wait)
		retryAfter = time.After(wait)
	}
}
