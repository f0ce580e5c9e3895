package bootstrap

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Forming by data (-form-rank): after a full shutdown of some applications
// (Galera: the highest seqno in grastate.dat) only the member with the
// newest data may form; forming from any other loses committed writes. A
// rank is a comparable data position a command prints in each member
// before it is told its role: a decimal integer, larger is newer; -1 or
// empty output means no data (NoData).
//
// DecideRank is the pure rule. It applies only on a cold start of a cluster
// that existed before: the record's former is down (its pod, by UID, no
// longer exists, or it asked for its role again since the record was
// written: see RankInput.formerDown) and no expected member runs (is
// Ready). Then every expected member's rank is awaited (or a quorum of
// them, when allowed), the highest rank forms (ties: the lowest ordinal,
// the first in Expected) and the rest join; the caller records the
// decision in the Lease as the new former, which starts a new epoch,
// before anyone is told, so that the record rule (Decide) gives the roles
// from then on: exactly one form, and join to a member that appears after
// the decision.
//
// A member asking for its role again in a new process while its running
// mark stands (its application stopped: the container restarted, or it
// gave up waiting for the member to join) withdraws the mark: it writes
// its rank again, tagged with the record's epoch. A mark says the
// application may be running, so a marked member's rank is never used: a
// cluster whose every member stopped in place is decided by the ranks
// once each has asked again. Contract: a process asks for a role only
// while the application is stopped in its pod.

// NoData is the rank of a member without data.
const NoData int64 = -1

// ParseRank parses a rank command's standard output: a decimal integer of
// at least -1, surrounded by blanks; empty means NoData.
func ParseRank(out string) (int64, error) {
	s := strings.TrimSpace(out)
	if s == "" {
		return NoData, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < NoData {
		return 0, fmt.Errorf("rank output %q is not a decimal integer of at least -1", s)
	}
	return n, nil
}

// Rank is one member's entry in the cluster record under -form-rank.
type Rank struct {
	// UID is the pod that wrote the entry: an entry of an earlier pod of
	// the same name (before the shutdown) does not count.
	UID string `json:"uid"`
	// Value is the rank its command printed; meaningless when Err is set.
	Value int64 `json:"rank"`
	// Err is set when its command failed (exit status and the last line it
	// wrote to standard error): the member counts as missing.
	Err string `json:"error,omitempty"`
	// Role is set once the member was told its role: the running mark.
	Role Role `json:"role,omitempty"`
	// Epoch is the record's epoch (Record.Epoch) when the entry was
	// written: a former's rank written before the decision that named it
	// is not a withdrawal.
	Epoch int32 `json:"epoch,omitempty"`
}

// PodState is what the caller read of an expected member's pod.
type PodState struct {
	UID   string
	Ready bool // the pod's Ready condition
	// WasReady is set when the pod is Ready or its Ready condition turned
	// false after its init containers last finished: it was Ready since it
	// was told its role. Unknown counts as set (see joinedFormer).
	WasReady bool
}

// RankInput is everything DecideRank looks at.
type RankInput struct {
	// Self is this pod's name.
	Self string
	// Expected are the pod names of every expected member, lowest ordinal
	// first.
	Expected []string
	// Pods are the existing pods among the expected members and the
	// record's former, by name; a pod missing here does not exist.
	Pods map[string]PodState
	// Ranks are the cluster record's rank entries, by pod name.
	Ranks map[string]Rank
	// Quorum is the number of ranks enough to decide while others are
	// missing; 0 means every expected member's.
	Quorum int
	// Record is the cluster record (nil: none).
	Record *Record
	// FormerData is set when this pod holds the recorded former's data (a
	// claim of the pod that formed, or it is that pod): see joinedFormer.
	FormerData bool
	// Told is set once this process told a role: later peer sets keep it,
	// whatever the marks say.
	Told bool
}

// AsksAgain reports whether Self asks for its role in a new process while
// its running mark stands: its application stopped (its container
// restarted, its node did and the init containers run again, or it gave
// up waiting for the member it was told to join). It withdraws the mark
// before the rank rule uses its rank.
func (in RankInput) AsksAgain() bool {
	return !in.Told && in.marked(in.Self)
}

// asking reports whether Self asks again: its mark stands, or it withdrew
// it in the record's epoch and was not told a role since.
func (in RankInput) asking() bool {
	return !in.Told && (in.marked(in.Self) || in.withdrew(in.Self, in.Pods[in.Self].UID))
}

// withdrew reports whether pod (by uid) withdrew its running mark in the
// record's epoch: it asked again since the record was written. A rank
// written before the decision that wrote the record is of an earlier
// epoch.
func (in RankInput) withdrew(pod, uid string) bool {
	r, ok := in.Ranks[pod]
	return ok && r.UID == uid && r.Role == "" && r.Epoch >= in.Record.Epoch
}

// formerDown reports whether the record's former is down: its pod (by UID)
// is gone, or it withdrew its mark (see withdrew), or it is Self
// asking again. A former named by a rank decision still has the rank it
// wrote before the decision: it stands until it asks again. For Self
// asking again, a former that is not Ready counts as down too: Self
// withdraws and awaits the former's rank (or its readiness) instead of
// joining a member that may have stopped (every member crashed in place:
// the former may ask again only after Self started waiting for it).
func (in RankInput) formerDown() bool {
	rec := in.Record
	p, ok := in.Pods[rec.Pod]
	return !ok || p.UID != rec.UID || in.withdrew(rec.Pod, rec.UID) || in.asking() && (rec.Pod == in.Self || !p.Ready)
}

// RankReason names the rank rule that decided.
type RankReason string

// The rank reasons.
const (
	RankNotApplicable RankReason = "rank-not-applicable" // not a cold start of a formed cluster: Decide decides
	MemberRunning     RankReason = "member-running"      // another member runs the application: join it
	RankAwaited       RankReason = "rank-awaited"        // ranks are missing: no role yet
	HighestRank       RankReason = "highest-rank"        // this member has the highest rank: form
	LowerRank         RankReason = "lower-rank"          // another member has a higher rank (or the same and a lower ordinal): join
)

// RankDecision is the outcome of DecideRank.
type RankDecision struct {
	Reason RankReason
	// Role is empty with RankNotApplicable and RankAwaited.
	Role Role
	// Former is the pod name that forms (HighestRank, LowerRank) or that
	// runs (MemberRunning).
	Former string
	// FormerUID is the UID of Former's pod, for the record.
	FormerUID string
	// SelfRank is set when the rule needs this member's rank and the record
	// has none of this pod, or this pod asks again (a withdrawal): run the
	// command, write the entry, decide again.
	SelfRank bool
	// Awaited are the expected members without a usable rank; Failed those
	// of them whose command failed; Marked those whose running mark stands
	// (not running, not asked again yet).
	Awaited, Failed, Marked []string
	// Never are the expected members that never ran in this cluster (see
	// RankInput.everRan): not awaited, they have no data to compare.
	Never []string
	// Joined are the members told to join the former whose data this
	// member holds, not Ready (see RankInput.joinedFormer): not awaited.
	Joined []string
	Detail string
}

// Running returns the expected members other than Self that run the
// application: their pod is Ready. A mark alone is not running: a member
// told its role that is not Ready is starting, joining a member that may
// be gone, or stuck (outside a primary component), and its data may have
// changed since its rank: it is awaited until it asks again.
func (in RankInput) Running() []string {
	var out []string
	for _, name := range in.Expected {
		if p, ok := in.Pods[name]; ok && name != in.Self && p.Ready {
			out = append(out, name)
		}
	}
	return out
}

// marked reports a running mark written by name's current pod.
func (in RankInput) marked(name string) bool {
	r, ok := in.Ranks[name]
	return ok && r.Role != "" && r.UID == in.Pods[name].UID
}

// joinedFormer reports a member told join (by its current pod) that has
// not been Ready since, while Self holds the data of the former it was told
// to join. It never finished joining, so its data is at most the former's:
// it is not awaited (it runs its application, waiting for the former, and
// may never ask again). A joiner that was Ready may have gone on without
// the former, with newer data: it is awaited.
func (in RankInput) joinedFormer(name string) bool {
	p := in.Pods[name]
	return in.FormerData && in.marked(name) && in.Ranks[name].Role == Join && !p.Ready && !p.WasReady
}

// everRan reports whether the expected member name may hold data of this
// cluster: the record lists it as a member (a member is registered before
// it is told its role, and dropped only when its data is gone), or it has a
// running mark. A member that never ran has nothing newer to offer, so it
// is not awaited (a rank it reports still competes): awaiting it can wait
// forever, as under OrderedReady or after a scale-up during the first
// bootstrap its pod is created only once this one is Ready. A record
// without a member list (written before members were recorded) says
// nothing: every expected member is awaited.
func (in RankInput) everRan(name string) bool {
	if in.Record == nil || in.Record.Members == nil || name == in.Record.Pod {
		return true
	}
	if r, ok := in.Ranks[name]; ok && r.Role != "" {
		return true
	}
	return slices.ContainsFunc(in.Record.Members, func(m Member) bool { return m.Pod == name })
}

// DecideRank applies the rank rule (see the package documentation above).
// It is pure: the caller reads the pods and the record before and writes
// the entries and the decision after.
func DecideRank(in RankInput) RankDecision {
	rec := in.Record
	if rec == nil || rec.Pod == "" {
		return RankDecision{Reason: RankNotApplicable, Detail: "no member formed the cluster before: the ordinal rule decides"}
	}
	if !in.formerDown() {
		return RankDecision{Reason: RankNotApplicable,
			Detail: fmt.Sprintf("the member that formed the cluster (%s, uid %s) has not stopped since it was recorded: the cluster record decides", rec.Pod, rec.UID)}
	}
	if running := in.Running(); len(running) > 0 {
		return RankDecision{Reason: MemberRunning, Role: Join, Former: running[0], FormerUID: in.Pods[running[0]].UID,
			Detail: fmt.Sprintf("member %s runs the application (members running: %s): join it", running[0], strings.Join(running, ", "))}
	}
	self, ok := in.Ranks[in.Self]
	if p := in.Pods[in.Self]; !ok || self.UID != p.UID || self.Err != "" || in.AsksAgain() {
		// A failed command is run again: the failure may be passing.
		return RankDecision{Reason: RankAwaited, SelfRank: true,
			Detail: "cold start of a formed cluster: this member's rank is needed"}
	}
	d := RankDecision{Reason: RankAwaited}
	best, bestRank, have := "", NoData, 0
	for _, name := range in.Expected {
		r, ok := in.Ranks[name]
		p, exists := in.Pods[name]
		switch {
		case in.joinedFormer(name):
			d.Joined = append(d.Joined, name)
		case (!ok || !exists || r.UID != p.UID || r.Err != "") && !in.everRan(name):
			d.Never = append(d.Never, name) // not awaited; a rank it reports still counts
		case !ok || !exists || r.UID != p.UID:
			d.Awaited = append(d.Awaited, name)
		case r.Err != "":
			d.Awaited = append(d.Awaited, name)
			d.Failed = append(d.Failed, name)
		case r.Role != "" && name != in.Self:
			d.Awaited = append(d.Awaited, name)
			d.Marked = append(d.Marked, name)
		default:
			have++
			if best == "" || r.Value > bestRank {
				best, bestRank = name, r.Value
			}
		}
	}
	if !slices.Contains(in.Expected, in.Self) && self.Err == "" {
		// A member beyond the expected ones competes too: its data is data.
		have++
		if best == "" || self.Value > bestRank {
			best, bestRank = in.Self, self.Value
		}
	}
	enough := len(d.Awaited) == 0 || in.Quorum > 0 && have >= in.Quorum
	if !enough || best == "" {
		need := len(in.Expected) - len(d.Never) - len(d.Joined)
		if in.Quorum > 0 {
			need = in.Quorum
		}
		d.Detail = fmt.Sprintf("cold start of a formed cluster: %d of %d ranks needed, awaiting %s", have, need, strings.Join(d.Awaited, ", "))
		if len(d.Failed) > 0 {
			d.Detail += fmt.Sprintf(" (rank command failed in %s)", strings.Join(d.Failed, ", "))
		}
		if len(d.Marked) > 0 {
			d.Detail += fmt.Sprintf(" (told a role, not Ready, not asked again: %s)", strings.Join(d.Marked, ", "))
		}
		if len(d.Never) > 0 {
			d.Detail += fmt.Sprintf("; never ran in this cluster: %s", strings.Join(d.Never, ", "))
		}
		return d
	}
	d.Former, d.FormerUID = best, in.Pods[best].UID
	if best == in.Self {
		d.Role, d.Reason = Form, HighestRank
		d.Detail = fmt.Sprintf("cold start of a formed cluster: this member has the highest rank %d", bestRank)
	} else {
		d.Role, d.Reason = Join, LowerRank
		d.Detail = fmt.Sprintf("cold start of a formed cluster: %s has the highest rank %d (this member: %d)", best, bestRank, self.Value)
	}
	if len(d.Awaited) > 0 {
		d.Detail += fmt.Sprintf("; decided by a quorum of %d, without %s", in.Quorum, strings.Join(d.Awaited, ", "))
	}
	if len(d.Never) > 0 {
		d.Detail += fmt.Sprintf("; never ran in this cluster: %s", strings.Join(d.Never, ", "))
	}
	if len(d.Joined) > 0 {
		d.Detail += fmt.Sprintf("; told to join the former whose data this member holds, never Ready since: %s", strings.Join(d.Joined, ", "))
	}
	return d
}
