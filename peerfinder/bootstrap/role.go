// Package bootstrap decides whether a member forms a new cluster or joins an
// existing one: the pure Decide, with the effects around it in lease.go (the
// cluster record, a Kubernetes Lease, so that the decision survives the loss
// of a member's data) and replicas.go (the owning StatefulSet's
// spec.replicas as the expected cluster size).
//
// Without a record (no -cluster-lease) a member forms when its ordinal is
// the StatefulSet's first and no lower ordinal is visible; every other
// member, and every member without an ordinal, joins. With a record, the
// record wins while the cluster it records exists (while the data of any
// member it lists exists: its claims' UIDs, or its pod's UID without
// claims): only the pod that formed, or a successor mounting its claims,
// forms again, and a member that would form must first win the write of the
// Lease. A record whose every member's data is gone counts as none.
//
// With a rank command (-form-rank, rank.go) a cold start of a formed
// cluster is decided by data instead: the member with the highest rank
// forms, recorded in the Lease, after which the record rule above applies.
//
// The role is advice for a member with an empty data directory. While the
// Lease cannot be read nothing is delivered before the first role; after it
// the last role stands. The rule's reasons, history and limits (without a
// Lease a pod-0 that lost its data forms a second cluster; data outside
// claims is not seen) are in docs/design/bootstrap.md.
package bootstrap

import (
	"fmt"

	"github.com/flockd/flock/peerfinder/peer"
)

// Role is what a member should do at bootstrap.
type Role string

// The roles, as passed to hooks in PEER_FINDER_BOOTSTRAP.
const (
	Form Role = "form"
	Join Role = "join"
)

// Reason names the rule that decided.
type Reason string

// The reasons.
const (
	FirstOrdinal      Reason = "first-ordinal"         // self has the first ordinal: form
	NotFirstOrdinal   Reason = "not-first-ordinal"     // self has a later ordinal: join
	LowerOrdinalSeen  Reason = "lower-ordinal-visible" // a peer below the first ordinal is visible: join
	OrdinalUnknown    Reason = "ordinal-unknown"       // no ordinal and no Lease to elect with: join
	ElectedByLease    Reason = "elected-by-lease"      // no ordinal, Lease free: claim it to form
	RecordedSelf      Reason = "formed-by-self"        // the Lease names this very pod: form
	RecordedData      Reason = "formed-with-this-data" // the Lease names an earlier pod of this name whose claim this pod has: form
	RecordedOther     Reason = "formed-by-other"       // the Lease names another pod (or an earlier pod of the same name): join
	RecordUnreadable  Reason = "record-without-uid"    // the Lease names a pod but no UID: join
	SelfIdentityUnset Reason = "self-uid-unknown"      // a Lease is used but this pod's UID is unknown: join
	ClusterGone       Reason = "cluster-gone"          // every recorded member's data is gone and self does not form: no role yet
)

// Record is what a cluster record (the Lease) says about formation.
type Record struct {
	// Pod and UID identify the pod that formed the cluster; both are empty
	// while no member formed yet and members told to join are listed.
	Pod, UID string
	// Member is the key (FQDN) of the member that formed, when recorded.
	Member string
	// Members are the data identities of the member that formed and of the
	// members told to join since; nil in a record written before members
	// were recorded (its cluster's existence cannot be checked).
	Members []Member
	// Ranks are the members' rank entries under -form-rank, by pod name.
	Ranks map[string]Rank
	// Epoch counts the writes of a former over an existing Lease (its
	// spec.leaseTransitions): each rank decision starts a new one.
	Epoch int32

	version string // the Lease's resourceVersion when read
}

// Input is everything Decide looks at.
type Input struct {
	// Self is this member's key (FQDN) in Set.
	Self string
	// Set is the peer set about to be delivered; it contains Self.
	Set peer.Set
	// FirstOrdinal is the StatefulSet's first ordinal (spec.ordinals.start, 0 by default).
	FirstOrdinal int
	// UseRecord is true when a cluster record (Lease) is configured.
	UseRecord bool
	// Record is the record's content; nil when no member formed yet.
	// Ignored unless UseRecord.
	Record *Record
	// Stale is true when Record lists members and the data of every one of
	// them is gone: the cluster it records no longer exists.
	Stale bool
	// SelfPod and SelfUID identify this pod; SelfUID is required with a
	// record, since the pod name alone cannot tell a re-created pod apart.
	SelfPod, SelfUID string
	// FormerData is true when this pod mounts a claim of the member that
	// formed (the record's entry of the forming pod's UID), or is its pod.
	FormerData bool
}

// Decision is the outcome of Decide.
type Decision struct {
	// Role is empty with reason ClusterGone: no role until a member forms.
	Role   Role
	Reason Reason
	// Former is the key (FQDN) of the member that formed or forms the
	// cluster, the one joiners target: Self when told to form; with a
	// record naming a former, its recorded member; without one, the
	// visible peer with the lowest ordinal. Empty when not known (no role,
	// or a record that names no member key).
	Former string
	// Detail explains the decision in words.
	Detail string
	// Claim is set when Role is Form and a record is in use but names nobody
	// yet or is stale: the caller must write itself into the record first
	// (over the stale one), and decide again (it will then get RecordedSelf
	// or RecordedOther).
	Claim bool
	// Adopt is set with reason RecordedData: the caller writes itself into
	// the record as the pod that formed (keeping the member list), and
	// decides again (it will then get RecordedSelf).
	Adopt bool
}

// Decide applies the bootstrap rule (see the package documentation). It is
// pure: the caller reads the record before and writes it after.
func Decide(in Input) Decision {
	d := decide(in)
	d.Former = formerOf(in, d)
	return d
}

// formerOf is Decision.Former for d, decided for in. A member told to join
// never targets itself (a pod-0 re-created without its data, whose name the
// record holds): it gets the lowest other visible ordinal.
func formerOf(in Input, d Decision) string {
	switch r := in.Record; {
	case d.Role == Form:
		return in.Self
	case d.Role == "":
		return ""
	case in.UseRecord && r != nil && r.Pod != "" && !in.Stale && r.Member != in.Self:
		return r.Member // "" when the record names no member key
	}
	former, lowest := "", -1
	for _, p := range in.Set.Peers() {
		if p.Ordinal >= 0 && p.Key() != in.Self && (lowest < 0 || p.Ordinal < lowest) {
			former, lowest = p.Key(), p.Ordinal
		}
	}
	return former
}

func decide(in Input) Decision {
	if in.UseRecord {
		if in.SelfUID == "" {
			return Decision{Role: Join, Reason: SelfIdentityUnset,
				Detail: "this pod's UID is unknown, so a recorded formation cannot be attributed; set POD_UID from the downward API (metadata.uid) or allow get on pods"}
		}
		if r := in.Record; r != nil && in.Stale && r.UID != in.SelfUID {
			d := decide(Input{Self: in.Self, Set: in.Set, FirstOrdinal: in.FirstOrdinal, UseRecord: true, SelfPod: in.SelfPod, SelfUID: in.SelfUID})
			if d.Role == Join {
				return Decision{Reason: ClusterGone,
					Detail: fmt.Sprintf("the data of every member in the cluster record (formed by %s) is gone, so that cluster no longer exists; waiting for a member that forms a new one (%s)", r.Pod, d.Detail)}
			}
			d.Detail = fmt.Sprintf("the data of every member in the cluster record (formed by %s) is gone, so that cluster no longer exists; %s", r.Pod, d.Detail)
			return d
		}
		// A record without Pod lists members told to join before any member
		// formed: nobody formed yet, so the rule below decides.
		if r := in.Record; r != nil && r.Pod != "" {
			switch {
			case r.UID == "":
				return Decision{Role: Join, Reason: RecordUnreadable,
					Detail: fmt.Sprintf("the cluster record names pod %q without a UID; treating the cluster as formed", r.Pod)}
			case r.UID == in.SelfUID:
				return Decision{Role: Form, Reason: RecordedSelf,
					Detail: fmt.Sprintf("the cluster record names this pod (%s, uid %s) as the one that formed the cluster", r.Pod, r.UID)}
			case r.Pod == in.SelfPod && in.FormerData:
				return Decision{Role: Form, Reason: RecordedData, Adopt: true,
					Detail: fmt.Sprintf("the cluster was formed by an earlier pod named %s (uid %s) whose claim this pod mounts: the same member with the same data", r.Pod, r.UID)}
			case r.Pod == in.SelfPod:
				return Decision{Role: Join, Reason: RecordedOther,
					Detail: fmt.Sprintf("the cluster was formed by an earlier pod named %s (uid %s); this pod (uid %s) replaces it and must join, even if its data is empty", r.Pod, r.UID, in.SelfUID)}
			default:
				return Decision{Role: Join, Reason: RecordedOther,
					Detail: fmt.Sprintf("the cluster was formed by pod %s (uid %s)", r.Pod, r.UID)}
			}
		}
	}
	self, ok := in.Set.Get(in.Self)
	if !ok || self.Ordinal < 0 {
		if in.UseRecord {
			return Decision{Role: Form, Reason: ElectedByLease, Claim: true,
				Detail: "no ordinal is known and no member formed the cluster yet; claiming the cluster record"}
		}
		return Decision{Role: Join, Reason: OrdinalUnknown,
			Detail: "this member's ordinal is unknown (not a StatefulSet pod name); only the first ordinal forms without a cluster record"}
	}
	for _, p := range in.Set.Peers() {
		if p.Ordinal >= 0 && p.Ordinal < self.Ordinal && p.Key() != in.Self {
			return Decision{Role: Join, Reason: LowerOrdinalSeen,
				Detail: fmt.Sprintf("peer %s has the lower ordinal %d", p.Key(), p.Ordinal)}
		}
	}
	if self.Ordinal != in.FirstOrdinal {
		return Decision{Role: Join, Reason: NotFirstOrdinal,
			Detail: fmt.Sprintf("ordinal %d is not the first ordinal %d", self.Ordinal, in.FirstOrdinal)}
	}
	d := Decision{Role: Form, Reason: FirstOrdinal,
		Detail: fmt.Sprintf("ordinal %d is the first ordinal and no lower one is visible", self.Ordinal)}
	if in.UseRecord {
		d.Claim = true
		d.Detail += "; claiming the cluster record"
	}
	return d
}
