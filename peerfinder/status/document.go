// Package status is peer-finder's account of its own state: the /status
// document that a running peer-finder serves (Build, from the engine's
// state that /readyz reads too), and `peer-finder status`, which lists a
// workload's pods and prints each member's document through the API
// server's pods/proxy (Main).
package status

import (
	"fmt"
	"strings"
	"time"

	"github.com/flockd/flock/peerfinder/engine"
	"github.com/flockd/flock/peerfinder/membership"
)

// DocumentVersion is the version of the /status document; a change that
// removes or redefines a field makes a new version (docs/status.md).
const DocumentVersion = 1

// Document is what a peer-finder serves at /status (docs/status.md).
type Document struct {
	// Version is DocumentVersion.
	Version int `json:"version"`
	// Self is this member's name among its peers.
	Self string `json:"self"`
	// Ready is /readyz's answer: a set was delivered to every sink.
	Ready bool `json:"ready"`
	// Generation is the newest published generation (0: none yet); above
	// Delivered.Generation while a newer set is on its way or held back.
	Generation uint64 `json:"generation"`
	// Delivered is the set every sink applied last; absent before the
	// first delivery.
	Delivered *Delivered `json:"delivered,omitempty"`
	// HeldBy is the gate holding the next delivery back; absent when none
	// does (delivered, or a delivery under way).
	HeldBy *Hold `json:"heldBy,omitempty"`
	// Verdict is membership's latest verdict on what the sources see.
	Verdict Verdict `json:"verdict"`
	// Sinks are the sinks' states, in delivery order.
	Sinks []Sink `json:"sinks"`
	// Warnings are the sinks' standing warnings, "<sink>: <warning>".
	Warnings []string `json:"warnings,omitempty"`
}

// Delivered is the set every sink applied last.
type Delivered struct {
	Generation uint64    `json:"generation"`
	At         time.Time `json:"at"`
	// Peers are the peers' keys (their FQDNs, as hooks read them).
	Peers []string `json:"peers"`
	// Bootstrap is the role delivered with it (form, join; empty without
	// -cluster-lease), Former the member that formed or forms
	// (PEER_FINDER_FORMER).
	Bootstrap string `json:"bootstrap,omitempty"`
	Former    string `json:"former,omitempty"`
}

// Hold names what holds a delivery back and why.
type Hold struct {
	// Gate is a membership reason (too-few-peers, not-stable-yet, ...),
	// outgrown, bootstrap-role, bootstrap-role-pending, sink-failing or
	// sink-pending.
	Gate   string `json:"gate"`
	Detail string `json:"detail"`
}

// Verdict is membership.Verdict's account.
type Verdict struct {
	Reason  string   `json:"reason"`
	Detail  string   `json:"detail,omitempty"`
	Peers   int      `json:"peers"`
	Need    int      `json:"need"`
	Missing []string `json:"missing,omitempty"`
}

// Sink is one sink's state.
type Sink struct {
	Name string `json:"name"`
	// State is ok, failing or pending (waiting, not failing).
	State string `json:"state"`
	// HoldsBack tells whether its failure holds back the sinks after it.
	HoldsBack bool   `json:"holdsBack"`
	Error     string `json:"error,omitempty"`
}

// Gates that are not membership reasons (Hold.Gate).
const (
	GateOutgrown    = "outgrown"
	GateRole        = "bootstrap-role"
	GateRolePending = "bootstrap-role-pending"
	GateSinkFailing = "sink-failing"
	GateSinkPending = "sink-pending"
)

// Build is the document of self's engine state st; warnings are the
// sinks' standing warnings (sink.Warner), each "<sink>: <warning>".
func Build(self string, st engine.Status, warnings []string) Document {
	d := Document{
		Version: DocumentVersion, Self: self, Ready: st.Delivered, Generation: st.Generation,
		HeldBy: HeldBy(st),
		Verdict: Verdict{
			Reason: string(st.Verdict.Reason), Detail: st.Verdict.Detail,
			Peers: st.Verdict.Peers, Need: st.Verdict.Need, Missing: st.Verdict.Missing,
		},
		Sinks:    make([]Sink, 0, len(st.Sinks)),
		Warnings: warnings,
	}
	if l := st.Last; l.Generation > 0 {
		d.Delivered = &Delivered{Generation: l.Generation, At: l.At.UTC(), Peers: l.Set.Keys(), Bootstrap: l.Role, Former: l.Former}
		if d.Delivered.Peers == nil {
			d.Delivered.Peers = []string{}
		}
	}
	for _, s := range st.Sinks {
		d.Sinks = append(d.Sinks, Sink{Name: s.Name, State: sinkState(s), HoldsBack: s.HoldsBack, Error: s.Err})
	}
	return d
}

func sinkState(s engine.SinkStatus) string {
	switch {
	case s.Failing:
		return "failing"
	case s.Pending:
		return "pending"
	}
	return "ok"
}

// HeldBy is the first gate, in pipeline order, that holds the next
// delivery back: membership's verdict, a published set the expected size
// outgrew, the bootstrap role, then the first failing or waiting sink
// that holds back the ones after it (a sink that does not is a warning of
// its own, not a gate). Nil when nothing does.
func HeldBy(st engine.Status) *Hold {
	v := st.Verdict
	switch {
	case v.Reason != "" && !v.Publishable():
		detail := v.Detail
		if v.Reason == membership.WaitNames && detail == "" {
			detail = "missing " + strings.Join(v.Missing, ", ")
		}
		return &Hold{Gate: string(v.Reason), Detail: detail}
	case st.Held:
		return &Hold{Gate: GateOutgrown, Detail: fmt.Sprintf("the expected size grew to %d after the newest set was published", v.Need)}
	case st.RoleErr != "" && st.RolePending:
		return &Hold{Gate: GateRolePending, Detail: st.RoleErr}
	case st.RoleErr != "":
		return &Hold{Gate: GateRole, Detail: st.RoleErr}
	}
	for _, s := range st.Sinks {
		if !s.HoldsBack {
			continue
		}
		switch {
		case s.Failing:
			return &Hold{Gate: GateSinkFailing, Detail: s.Name + ": " + s.Err}
		case s.Pending:
			return &Hold{Gate: GateSinkPending, Detail: s.Name + ": " + s.Err}
		}
	}
	return nil
}
