package bootstrap

import (
	"context"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/flockd/flock/internal/ordinal"
	"github.com/flockd/flock/peerfinder/peer"
)

// ErrRankAwaited is wrapped by Role while other members' ranks are awaited:
// "not yet", not a failure (the wiring makes it a pending result, re-checked
// without backoff). It wraps ErrNoRole.
var ErrRankAwaited = fmt.Errorf("%w: ranks awaited", ErrNoRole)

// RankDecision returns what the rank rule (DecideRank) says for in, reading
// (never writing) the expected members' pods; applies is false when the
// rank rule is off or Decide decides (RankNotApplicable). Diagnose mode
// uses it to say what is awaited.
func (r *Roler) RankDecision(ctx context.Context, in Input) (d RankDecision, applies bool, err error) {
	return r.rankDecision(ctx, in)
}

func (r *Roler) rankDecision(ctx context.Context, in Input) (RankDecision, bool, error) {
	rec := in.Record
	r.mu.Lock()
	told := r.last.Role != ""
	r.mu.Unlock()
	// Only a formed cluster whose record is not stale and not this pod's
	// (unless this pod asks again: RankInput.AsksAgain) can be cold
	// started: spare the pod reads otherwise.
	if r.Rank == nil || r.Lease == nil || r.Data == nil || rec == nil || rec.Pod == "" || in.Stale || rec.UID == in.SelfUID && told {
		return RankDecision{}, false, nil
	}
	rin := RankInput{Self: r.Pod, Quorum: r.RankQuorum, Record: rec, Ranks: rec.Ranks, Pods: map[string]PodState{}, FormerData: in.FormerData, Told: told}
	n := 0
	if r.Size != nil {
		n = r.Size()
	}
	prefix, cut := strings.CutSuffix(r.Pod, fmt.Sprintf("-%d", ordinal.FromName(r.Pod)))
	switch {
	case ordinal.FromName(r.Pod) < 0 || !cut:
		return RankDecision{}, false, fmt.Errorf("%w: -form-rank: pod %s has no StatefulSet ordinal, so the expected members are unknown", ErrNoRole, r.Pod)
	case n <= 0:
		return RankDecision{}, false, fmt.Errorf("%w: -form-rank: the expected size is not known yet", ErrNoRole)
	}
	for i := in.FirstOrdinal; i < in.FirstOrdinal+n; i++ {
		rin.Expected = append(rin.Expected, fmt.Sprintf("%s-%d", prefix, i))
	}
	// This pod is itself (only its UID is used). The former's pod first:
	// while it exists and has not withdrawn its mark (the steady state) the
	// rank rule does not apply and the other pods need not be read, unless
	// it is this pod asking again, or the former is not Ready while this
	// pod asks again.
	rin.Pods[r.Pod] = PodState{UID: in.SelfUID}
	again := rin.asking()
	for _, name := range append([]string{rec.Pod}, rin.Expected...) {
		if _, seen := rin.Pods[name]; seen {
			continue
		}
		st, ok, err := r.Data.Pod(ctx, name)
		if err != nil {
			return RankDecision{}, false, err
		}
		if ok {
			rin.Pods[name] = st
		}
		if name == rec.Pod && ok && st.UID == rec.UID && !rin.withdrew(rec.Pod, rec.UID) && (st.Ready || !again) {
			break
		}
	}
	d := DecideRank(rin)
	if runner := runnerJoined(d, rin, again, told); runner != "" {
		if left := r.confirmRunning(runner, rin.Pods[runner].UID); left > 0 {
			return RankDecision{Reason: RankAwaited, Awaited: []string{runner},
				Detail: fmt.Sprintf("this member asks again and %s is Ready: confirming it runs, %s more (a member stopped with this one may still show Ready)", runner, left.Round(time.Second))}, true, nil
		}
	} else {
		r.confirmRunning("", "")
	}
	return d, d.Reason != RankNotApplicable, nil
}

// RunningSettle is how long a member asking again sees another member
// Ready before it is told to join it: the kubelet reports a stopped
// container's pod not Ready a moment after it stopped, and a member whose
// process stopped together with this one (every member crashed in place)
// must not be joined.
const RunningSettle = 10 * time.Second

// runnerJoined returns the member Self would be told to join because its
// pod is Ready, while Self asks again and has not been told its role by
// this process: the record's former (the rank rule does not apply) or a
// running member (MemberRunning); "" otherwise.
func runnerJoined(d RankDecision, rin RankInput, again, told bool) string {
	switch {
	case !again || told:
		return ""
	case d.Reason == MemberRunning:
		return d.Former
	case d.Reason == RankNotApplicable && rin.Record.Pod != rin.Self:
		if p, ok := rin.Pods[rin.Record.Pod]; ok && p.Ready {
			return rin.Record.Pod
		}
	}
	return ""
}

// confirmRunning returns how much longer pod (by uid) must be seen Ready,
// counted from the first of the consecutive checks that saw it; "" forgets.
func (r *Roler) confirmRunning(pod, uid string) time.Duration {
	now := time.Now()
	if r.Clock != nil {
		now = r.Clock()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running.pod != pod || r.running.uid != uid {
		r.running.pod, r.running.uid, r.running.since = pod, uid, now
	}
	if pod == "" {
		return 0
	}
	return RunningSettle - now.Sub(r.running.since)
}

// byRank acts on a rank decision that applies: it runs the rank command
// and writes this member's entry (withdrawing its mark), waits, joins a
// running member, or records the member with the highest rank as the
// former, in a new epoch (then the record rule gives every member its
// role: exactly one form).
func (r *Roler) byRank(ctx context.Context, in Input, rd RankDecision, set peer.Set, self string) (Decision, error) {
	me, err := r.member(ctx)
	if err != nil {
		return Decision{}, err
	}
	switch {
	case rd.SelfRank:
		return Decision{}, r.writeRank(ctx, in.Record, me)
	case rd.Role == "":
		r.logAwaited(rd)
		return Decision{}, fmt.Errorf("%w: %s", ErrRankAwaited, rd.Detail)
	case rd.Reason == MemberRunning:
		// Registered like any member told its role: it will hold data a
		// later cold start must await.
		d := Decision{Role: rd.Role, Reason: Reason(rd.Reason), Former: r.keyOf(set, self, rd.Former), Detail: rd.Detail}
		next, changed := register(in.Record, me, nil)
		if mark := r.markOf(in.Record, me, d); mark != nil || changed {
			err := r.Lease.update(ctx, in.Record, func(obj *coordinationv1.Lease) error {
				if changed {
					if err := setMembers(obj, next); err != nil {
						return err
					}
				}
				if mark == nil {
					return nil
				}
				return setRank(obj, r.Pod, *mark)
			})
			if err != nil {
				return Decision{}, err
			}
		}
		return d, nil
	}
	if r.Logger != nil {
		r.Logger.Info("recording the member with the highest rank as the former", "former", rd.Former, "reason", rd.Reason, "detail", rd.Detail)
	}
	rec := Record{Pod: rd.Former, UID: rd.FormerUID, Members: in.Record.Members}
	if err := r.Lease.Replace(ctx, in.Record, rec, r.keyOf(set, self, rd.Former)); err != nil {
		return Decision{}, err
	}
	return Decision{}, ErrChanged // read it back: the record decides
}

// logAwaited logs what the rank rule awaits once per change: the engine
// re-checks a pending role quietly.
func (r *Roler) logAwaited(rd RankDecision) {
	r.mu.Lock()
	changed := rd.Detail != r.awaited
	r.awaited = rd.Detail
	r.mu.Unlock()
	if changed && r.Logger != nil {
		r.Logger.Info("awaiting ranks", "awaited", rd.Awaited, "failed", rd.Failed, "never_ran", rd.Never, "detail", rd.Detail)
	}
}

// writeRank runs the rank command and writes this member's entry; a failed
// command is written too (the others see why this member is missing).
func (r *Roler) writeRank(ctx context.Context, rec *Record, me Member) error {
	v, err := r.Rank(ctx)
	next := Rank{UID: me.UID, Value: v, Epoch: rec.Epoch}
	if err != nil {
		next = Rank{UID: me.UID, Value: NoData, Err: err.Error(), Epoch: rec.Epoch}
	}
	if r.Logger != nil {
		if err != nil {
			r.Logger.Warn("rank command failed; this member counts as missing", "err", err)
		} else {
			r.Logger.Info("rank", "rank", v)
		}
	}
	if cur, ok := rec.Ranks[r.Pod]; ok && cur == next {
		return fmt.Errorf("%w: %s", ErrNoRole, next.Err) // failed again the same way
	}
	if err := r.Lease.update(ctx, rec, func(obj *coordinationv1.Lease) error { return setRank(obj, r.Pod, next) }); err != nil {
		return err
	}
	return ErrChanged // read it back and decide
}

// markOf is this member's entry with the running mark for d, nil when the
// rank rule is off or the record already has it.
func (r *Roler) markOf(rec *Record, me Member, d Decision) *Rank {
	if r.Rank == nil || rec == nil || d.Role == "" {
		return nil
	}
	cur, ok := rec.Ranks[r.Pod]
	if ok && cur.UID == me.UID && cur.Role == d.Role {
		return nil
	}
	next := Rank{UID: me.UID, Value: NoData, Role: d.Role, Epoch: rec.Epoch}
	if ok && cur.UID == me.UID {
		next.Value, next.Err = cur.Value, cur.Err
	}
	return &next
}

// keyOf is pod's member key: its peer's in set, else self's with the pod
// name replaced.
func (r *Roler) keyOf(set peer.Set, self, pod string) string {
	for _, p := range set.Peers() {
		if p.Name == pod {
			return p.Key()
		}
	}
	if rest, ok := strings.CutPrefix(self, r.Pod+"."); ok {
		return pod + "." + rest
	}
	return pod
}
