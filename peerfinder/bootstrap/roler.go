package bootstrap

import (
	"context"
	"log/slog"
	"sync"

	"github.com/flockd/flock/peerfinder/peer"
)

// Roler tells the engine this member's bootstrap role (it fits
// engine.RoleFunc). With a Lease it reads the record for every new peer
// set, and claims it when the rule says this member forms; without one the
// rule alone decides.
type Roler struct {
	// Lease is the cluster record; nil means none.
	Lease *Lease
	// Pod and UID identify this pod. UID is required with a Lease.
	Pod, UID string
	// FirstOrdinal returns the StatefulSet's first ordinal; nil means 0.
	FirstOrdinal func() int
	Logger       *slog.Logger

	mu   sync.Mutex
	last Decision
}

// Input returns the rule's input for set, reading (never writing) the
// Lease. Diagnose mode uses it to predict the role without side effects.
func (r *Roler) Input(ctx context.Context, set peer.Set, self string) (Input, error) {
	in := Input{Self: self, Set: set, UseRecord: r.Lease != nil, SelfPod: r.Pod, SelfUID: r.UID}
	if r.FirstOrdinal != nil {
		in.FirstOrdinal = r.FirstOrdinal()
	}
	if r.Lease != nil {
		rec, err := r.Lease.Read(ctx)
		if err != nil {
			return Input{}, err
		}
		in.Record = rec
	}
	return in, nil
}

// Role decides the role for set, claiming the Lease first when this member
// is the one to form. When the Lease cannot be read or written, the first
// time is an error (the engine retries with backoff; no role is guessed);
// after a role was decided once, that role is kept and the failure logged,
// so an API outage does not hold back later peer sets.
func (r *Roler) Role(ctx context.Context, set peer.Set, self string) (string, error) {
	d, err := r.decide(ctx, set, self)
	if err != nil {
		r.mu.Lock()
		last := r.last
		r.mu.Unlock()
		if last.Role == "" {
			return "", err
		}
		if r.Logger != nil {
			r.Logger.Warn("cannot read the cluster record; keeping the bootstrap role", "role", last.Role, "err", err)
		}
		return string(last.Role), nil
	}
	r.mu.Lock()
	changed := d != r.last
	r.last = d
	r.mu.Unlock()
	if changed && r.Logger != nil {
		r.Logger.Info("bootstrap role", "role", d.Role, "reason", d.Reason, "detail", d.Detail)
	}
	return string(d.Role), nil
}

func (r *Roler) decide(ctx context.Context, set peer.Set, self string) (Decision, error) {
	in, err := r.Input(ctx, set, self)
	if err != nil {
		return Decision{}, err
	}
	d := Decide(in)
	if d.Claim {
		rec, err := r.Lease.Claim(ctx, Record{Pod: r.Pod, UID: r.UID}, self)
		if err != nil {
			return Decision{}, err
		}
		in.Record = rec
		d = Decide(in)
	}
	return d, nil
}
