package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/flockd/flock/peerfinder/events"
	"github.com/flockd/flock/peerfinder/peer"
)

// Roler tells the engine this member's bootstrap role (it fits
// engine.RoleFunc). With a Lease it reads the record for every new peer
// set, claims it when the rule says this member forms, and adds this
// member's data identity to it; without one the rule alone decides.
type Roler struct {
	// Lease is the cluster record; nil means none.
	Lease *Lease
	// Data reads this pod's and the recorded members' data identities;
	// nil means none are recorded or checked (the record is never stale).
	Data *Data
	// Pod and UID identify this pod. UID is required with a Lease and no
	// Data (Data reads it from the pod).
	Pod, UID string
	// FirstOrdinal returns the StatefulSet's first ordinal; nil means 0.
	FirstOrdinal func() int
	Logger       *slog.Logger
	// Events is told of each decided or changed role (events.BootstrapRole);
	// nil: none.
	Events events.Emitter
	// Rank runs -form-rank's command (RankCommand); nil: the rank rule is
	// off and Decide alone decides. Needs Lease and Data.
	Rank func(context.Context) (int64, error)
	// RankQuorum is -form-rank-quorum: 0 awaits every expected member's rank.
	RankQuorum int
	// Size returns the number of expected members whose ranks are awaited
	// (spec.replicas or -expect); required with Rank.
	Size func() int
	// Clock returns the time (RunningSettle); nil: time.Now.
	Clock func() time.Time

	mu      sync.Mutex
	self    *Member // read once from Data
	last    Decision
	awaited string // the last rank-awaited detail logged
	// running is the member seen Ready since while this one asks again.
	running struct {
		pod, uid string
		since    time.Time
	}
}

// ErrNoRole is wrapped by Role when no role can be given yet (reason
// ClusterGone): the engine retries.
var ErrNoRole = errors.New("no bootstrap role yet")

// Input returns the rule's input for set, reading (never writing) the
// Lease and the recorded members' data. Diagnose mode uses it to predict
// the role without side effects.
func (r *Roler) Input(ctx context.Context, set peer.Set, self string) (Input, error) {
	in, _, err := r.input(ctx, set, self)
	return in, err
}

// input also returns the recorded members found gone.
func (r *Roler) input(ctx context.Context, set peer.Set, self string) (Input, []Member, error) {
	in := Input{Self: self, Set: set, UseRecord: r.Lease != nil, SelfPod: r.Pod, SelfUID: r.UID}
	if r.FirstOrdinal != nil {
		in.FirstOrdinal = r.FirstOrdinal()
	}
	if r.Lease == nil {
		return in, nil, nil
	}
	me, err := r.member(ctx)
	if err != nil {
		return Input{}, nil, err
	}
	in.SelfUID = me.UID
	rec, err := r.Lease.Read(ctx)
	if err != nil {
		return Input{}, nil, err
	}
	in.Record = rec
	if rec != nil && rec.UID == me.UID {
		in.FormerData = true // the former's own pod
	}
	if rec == nil || len(rec.Members) == 0 || rec.UID == me.UID || r.Data == nil {
		return in, nil, nil
	}
	for _, m := range rec.Members {
		if m.UID == rec.UID && m.sharesData(me) {
			in.FormerData = true
		}
	}
	var gone []Member
	for _, m := range rec.Members {
		if m.UID == me.UID || m.sharesData(me) {
			return in, nil, nil // this member's own data is the cluster's
		}
	}
	for _, m := range rec.Members {
		ok, err := r.Data.Exists(ctx, m)
		if err != nil {
			return Input{}, nil, err
		}
		if !ok {
			gone = append(gone, m)
		}
	}
	in.Stale = len(gone) == len(rec.Members)
	return in, gone, nil
}

// member returns this pod's data identity, read once.
func (r *Roler) member(ctx context.Context) (Member, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.self != nil {
		return *r.self, nil
	}
	if r.Data == nil {
		return Member{Pod: r.Pod, UID: r.UID}, nil
	}
	m, err := r.Data.Self(ctx, r.Pod)
	if err != nil {
		return Member{}, err
	}
	r.self = &m
	return m, nil
}

// Role decides the role for set, claiming the Lease first when this member
// is the one to form. When the Lease cannot be read or written, the first
// time is an error (the engine retries with backoff; no role is guessed);
// after a role was decided once, that role is kept and the failure logged,
// so an API outage does not hold back later peer sets.
func (r *Roler) Role(ctx context.Context, set peer.Set, self string) (string, error) {
	role, _, err := r.Bootstrap(ctx, set, self)
	return role, err
}

// Bootstrap is Role with the former it decided too (Decision.Former): the
// engine's RoleFunc.
func (r *Roler) Bootstrap(ctx context.Context, set peer.Set, self string) (role, former string, err error) {
	d, err := r.decide(ctx, set, self)
	if err != nil {
		r.mu.Lock()
		last := r.last
		r.mu.Unlock()
		if last.Role == "" {
			return "", "", err
		}
		if r.Logger != nil {
			r.Logger.Warn("cannot read the cluster record; keeping the bootstrap role", "role", last.Role, "err", err)
		}
		return string(last.Role), last.Former, nil
	}
	r.mu.Lock()
	changed := d != r.last
	r.last = d
	r.mu.Unlock()
	if changed {
		if r.Logger != nil {
			r.Logger.Info("bootstrap role", "role", d.Role, "reason", d.Reason, "detail", d.Detail, "former", d.Former)
		}
		events.OrNop(r.Events).Emit(events.BootstrapRole(string(d.Role), string(d.Reason), d.Detail))
	}
	return string(d.Role), d.Former, nil
}

// conflicts paces the re-reads after a write lost to another member's:
// members starting together all register, one write at a time.
var conflicts = wait.Backoff{Steps: 30, Duration: 10 * time.Millisecond, Factor: 1.3, Jitter: 1, Cap: time.Second}

func (r *Roler) decide(ctx context.Context, set peer.Set, self string) (Decision, error) {
	var d Decision
	err := retry.OnError(conflicts, func(err error) bool { return errors.Is(err, ErrChanged) && ctx.Err() == nil }, func() error {
		var err error
		d, err = r.decideOnce(ctx, set, self)
		return err
	})
	if errors.Is(err, ErrChanged) {
		return Decision{}, fmt.Errorf("cluster record %s/%s: %w, %d times", r.Lease.Namespace, r.Lease.Name, err, conflicts.Steps)
	}
	return d, err
}

// decideOnce reads, decides and writes once; ErrChanged means a write lost
// to another's (or a claim was written): read and decide again.
func (r *Roler) decideOnce(ctx context.Context, set peer.Set, self string) (Decision, error) {
	in, gone, err := r.input(ctx, set, self)
	if err != nil {
		return Decision{}, err
	}
	if rd, applies, err := r.rankDecision(ctx, in); err != nil {
		return Decision{}, err
	} else if applies {
		return r.byRank(ctx, in, rd, set, self)
	}
	d := Decide(in)
	if d.Role == "" {
		return Decision{}, fmt.Errorf("%w: %s", ErrNoRole, d.Detail)
	}
	if r.Lease == nil {
		return d, nil
	}
	me, err := r.member(ctx)
	if err != nil {
		return Decision{}, err
	}
	switch {
	case d.Claim && in.Record == nil:
		if _, err := r.Lease.Claim(ctx, Record{Pod: r.Pod, UID: me.UID, Members: []Member{me}}, self); err != nil {
			return Decision{}, err
		}
		return Decision{}, ErrChanged // read what won
	case d.Claim:
		// Over a stale record (every member gone) or one that lists the
		// members told to join before anyone formed (kept).
		members, _ := register(in.Record, me, gone)
		if members == nil {
			members = []Member{me}
		}
		if err := r.Lease.Replace(ctx, in.Record, Record{Pod: r.Pod, UID: me.UID, Members: members}, self); err != nil {
			return Decision{}, err
		}
		return Decision{}, ErrChanged
	case in.Record == nil && d.Role == Join && me.UID != "":
		if err := r.Lease.Open(ctx, []Member{me}); err != nil {
			return Decision{}, err
		}
		return Decision{}, ErrChanged // read it back: registered
	}
	next, changed := register(in.Record, me, gone)
	if d.Adopt {
		if r.Logger != nil {
			r.Logger.Info("adopting the cluster record", "reason", d.Reason, "detail", d.Detail)
		}
		if err := r.Lease.Replace(ctx, in.Record, Record{Pod: r.Pod, UID: me.UID, Members: next}, self); err != nil {
			return Decision{}, err
		}
		return Decision{}, ErrChanged // read it back: formed-by-self
	}
	mark := r.markOf(in.Record, me, d)
	if !changed && mark == nil {
		return d, nil
	}
	err = r.Lease.update(ctx, in.Record, func(obj *coordinationv1.Lease) error {
		if changed {
			if err := setMembers(obj, next); err != nil {
				return err
			}
		}
		if mark != nil {
			return setRank(obj, r.Pod, *mark)
		}
		return nil
	})
	if err != nil {
		return Decision{}, err
	}
	return d, nil
}

// register returns rec's member list with me in it, and whether that
// differs from rec's. It drops the members found gone and the entries me
// supersedes: an earlier pod of the same name that had no claims (a pod
// name is unique while the pod exists) or shared a claim with me. A record
// without a member list is left as it is.
func register(rec *Record, me Member, gone []Member) ([]Member, bool) {
	if rec == nil || rec.Members == nil {
		return nil, false
	}
	out := []Member{}
	found := false
	for _, m := range rec.Members {
		switch {
		case equalMember(m, me):
			found = true
		case containsMember(gone, m):
		case m.Pod == me.Pod && (len(m.Claims) == 0 || m.sharesData(me)):
		default:
			out = append(out, m)
		}
	}
	out = append(out, me)
	return out, !found || len(out) != len(rec.Members)
}

func containsMember(ms []Member, m Member) bool {
	for _, o := range ms {
		if equalMember(o, m) {
			return true
		}
	}
	return false
}

func equalMember(a, b Member) bool {
	if a.Pod != b.Pod || a.UID != b.UID || len(a.Claims) != len(b.Claims) {
		return false
	}
	for i := range a.Claims {
		if a.Claims[i] != b.Claims[i] {
			return false
		}
	}
	return true
}
