// Package membership decides, as a pure function, which peer set to publish
// and whether to publish it now. It performs no I/O and reads no clock: the
// caller passes the time and the previous observation in.
//
// The gates, in the order they are checked:
//
//	sources  every configured source has reported at least once
//	empty    the merged set is not empty
//	self     the set contains Self (upstream peer-finder's rule)
//	size     the expected size is known (ExpectPending is false) and the
//	         set has at least max(MinPeers, Expect) peers
//	names    every expected name is provided (Options.Missing, e.g. the
//	         hosts-file names of -wait-for-all each have an address)
//	stable   the set has been unchanged for StableFor
//
// Once a set was published (Options.Published) the names gate no longer
// applies: a later incomplete set (a retried pod) must not stall a running
// job. A set the names gate alone holds may be previewed (Verdict.Preview).
// A set already published is held back from its sinks, even from a retry,
// while the expected size has outgrown it (Outgrown). The one other reason
// a published set waits is a failing sink that holds back the sinks after
// it (sink.Blocking, applied by the engine in sink order).
//
// A source that fails keeps its last view (sources send nothing on failure),
// so a set never shrinks because a lookup failed.
package membership

import (
	"fmt"
	"strings"
	"time"

	"github.com/flockd/flock/peerfinder/peer"
)

// View is the latest snapshot of one source.
type View struct {
	// Source names the source, e.g. "dns" or "endpointslice".
	Source string
	// Reported is false until the source sent its first snapshot.
	Reported bool
	// Peers is the source's latest complete snapshot.
	Peers []peer.Peer
}

// Options configure the gates.
type Options struct {
	// Self is this member's key (FQDN). Empty disables the self gate.
	Self string
	// MinPeers is the smallest set size to publish (0 or 1: no gate).
	MinPeers int
	// Expect is the expected number of members, e.g. a StatefulSet's
	// spec.replicas (0: unknown). It gates like MinPeers.
	Expect int
	// ExpectPending is true while the expected size is still being looked
	// up (e.g. the StatefulSet was not read yet): the size gate holds.
	ExpectPending bool
	// Missing, when not nil, is the expected-names gate: it returns the
	// expected names that set does not provide yet, sorted, and delivery
	// waits while there is any. It must be pure (e.g. hostsfile's Missing:
	// the -wait-for-all names without an address). It applies only while
	// Published is false.
	Missing func(set peer.Set) []string
	// Published is true once a set was published: the expected-names gate
	// no longer applies, since a later incomplete set (a retried pod) must
	// not stall a running job.
	Published bool
	// StableFor is how long the merged set must stay unchanged before it is
	// published (0: publish at once).
	StableFor time.Duration
}

// Observation is the merged set the caller saw last and since when it has
// been unchanged. The zero value means nothing was observed yet.
type Observation struct {
	Set   peer.Set
	Since time.Time
}

// Reason says why a verdict publishes or waits.
type Reason string

// The reasons, one per gate.
const (
	Publish     Reason = "publish"
	WaitSources Reason = "waiting-for-sources"
	WaitEmpty   Reason = "no-peers"
	WaitSelf    Reason = "self-not-found"
	WaitSize    Reason = "too-few-peers"
	WaitExpect  Reason = "expected-size-unknown"
	WaitNames   Reason = "expected-names-missing"
	WaitStable  Reason = "not-stable-yet"
)

// Verdict is the decision of Compute.
type Verdict struct {
	// Reason is Publish when the set may be delivered, else the first gate
	// that holds it back.
	Reason Reason
	// Detail explains the reason in words, naming numbers and names.
	Detail string
	// Peers and Need are the visible and required set sizes.
	Peers, Need int
	// Missing are the expected names not provided yet (WaitNames).
	Missing []string
	// RecheckAfter, when positive, is when the verdict may change without
	// new input (the stable-for gate).
	RecheckAfter time.Duration
	// Preview is true when the expected-names gate alone holds the set:
	// sinks that can (sink.Previewer) show it before delivery, the expected
	// names listed as they resolve.
	Preview bool
}

// Outgrown reports whether the size gate now holds back a set published
// when the expected size was smaller (a scale-up while a sink was failing):
// its sinks get no set the gate would not publish now, not even a retry of
// a failed one. The next set that passes the gate, or need shrinking back,
// releases it.
func Outgrown(published peer.Set, need int) bool { return published.Len() < need }

// Publishable reports whether the set may be delivered.
func (v Verdict) Publishable() bool { return v.Reason == Publish }

// Compute merges the views (union by peer key; see peer.NewSet) and applies
// the gates. It returns the merged set, the observation to pass to the next
// call, and the verdict.
func Compute(views []View, opts Options, last Observation, now time.Time) (peer.Set, Observation, Verdict) {
	var all []peer.Peer
	var missing []string
	for _, v := range views {
		if !v.Reported {
			missing = append(missing, v.Source)
			continue
		}
		all = append(all, v.Peers...)
	}
	set := peer.NewSet(all...)
	obs := last
	if obs.Since.IsZero() || !set.Equal(last.Set) {
		obs = Observation{Set: set, Since: now}
	}
	need := max(opts.MinPeers, opts.Expect, 1)
	v := Verdict{Peers: set.Len(), Need: need}
	if opts.Missing != nil && !opts.Published {
		v.Missing = opts.Missing(set)
	}
	switch {
	case len(views) == 0:
		v.Reason, v.Detail = WaitSources, "no sources configured"
	case len(missing) > 0:
		v.Reason, v.Detail = WaitSources, fmt.Sprintf("no answer yet from %v", missing)
	case set.Len() == 0:
		v.Reason, v.Detail = WaitEmpty, "the sources answered with no peers"
	case opts.Self != "" && !set.Has(opts.Self):
		v.Reason, v.Detail = WaitSelf, fmt.Sprintf("%s is not among the %d peers found", opts.Self, set.Len())
	case opts.ExpectPending:
		v.Reason, v.Detail = WaitExpect, fmt.Sprintf("%d peers visible, the expected size is not known yet", set.Len())
	case set.Len() < need:
		v.Reason, v.Detail = WaitSize, fmt.Sprintf("%d of %d peers visible", set.Len(), need)
	case len(v.Missing) > 0:
		v.Reason, v.Preview = WaitNames, true
		v.Detail = fmt.Sprintf("waiting for %d expected names: %s", len(v.Missing), strings.Join(v.Missing, ", "))
	case now.Sub(obs.Since) < opts.StableFor:
		v.Reason = WaitStable
		v.RecheckAfter = opts.StableFor - now.Sub(obs.Since)
		v.Detail = fmt.Sprintf("set changed %s ago, waiting for %s without change", now.Sub(obs.Since).Round(time.Millisecond), opts.StableFor)
	default:
		v.Reason = Publish
	}
	return set, obs, v
}
