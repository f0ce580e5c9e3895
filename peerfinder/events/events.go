// Package events is what peer-finder says on its own pod as Kubernetes
// Events, for the changes of state an operator looks for with kubectl
// describe pod: the first delivery, the bootstrap role, a sink (hook or
// file) failing and recovering, the bootstrap timeout and a forbidden API
// request.
//
// The component that decides such a change calls an Emitter with the
// Event built by this package's constructor for its reason, next to its log
// line; the log line and the Event are independent, so renaming one does
// not touch the other. Package recorder posts them (events.k8s.io/v1). This
// package is a leaf: the engine and bootstrap import it without the
// Kubernetes client.
package events

import (
	"fmt"
	"sync"
)

// Controller is the Events' reportingController.
const Controller = "peer-finder"

// Reason is an Event's reason, CamelCase.
type Reason string

// The reasons peer-finder posts.
const (
	ReasonPeersDelivered   Reason = "PeersDelivered"
	ReasonBootstrapRole    Reason = "BootstrapRole"
	ReasonSinkFailing      Reason = "SinkFailing"
	ReasonSinkRecovered    Reason = "SinkRecovered"
	ReasonBootstrapTimeout Reason = "BootstrapTimeout"
	ReasonForbidden        Reason = "Forbidden"
)

// Event types, as corev1.EventTypeNormal and corev1.EventTypeWarning.
const (
	Normal  = "Normal"
	Warning = "Warning"
)

// Actions: what peer-finder was doing.
const (
	actionDeliver   = "Deliver"
	actionBootstrap = "Bootstrap"
	actionDiscover  = "Discover"
)

// Event is one Event to post on the pod. It is comparable: the recorder
// counts repeats of an equal Event as one series.
type Event struct {
	Type   string // Normal or Warning
	Reason Reason
	Action string // what peer-finder was doing, e.g. Deliver
	Note   string
}

// Emitter posts Events on peer-finder's own pod.
type Emitter interface {
	// Emit posts e. It must not block (an implementation that cannot post
	// e now drops it) and must be safe for concurrent use.
	Emit(e Event)
}

// Nop is the Emitter used when Events are off: it does nothing.
type Nop struct{}

// Emit does nothing.
func (Nop) Emit(Event) {}

// OrNop returns e, or Nop when e is nil.
func OrNop(e Emitter) Emitter {
	if e == nil {
		return Nop{}
	}
	return e
}

// PeersDelivered is the first delivery of a peer set (only the first: the
// caller emits it once). role is the bootstrap role, "" for none.
func PeersDelivered(peers int, generation uint64, role string) Event {
	note := fmt.Sprintf("first peer set delivered: %d peers (generation %d)", peers, generation)
	if role != "" {
		note += ", bootstrap role " + role
	}
	return Event{Type: Normal, Reason: ReasonPeersDelivered, Action: actionDeliver, Note: note}
}

// BootstrapRole is a decided (or changed) bootstrap role, with the rule's
// reason and its explanation.
func BootstrapRole(role, reason, detail string) Event {
	return Event{Type: Normal, Reason: ReasonBootstrapRole, Action: actionBootstrap,
		Note: fmt.Sprintf("%s (%s): %s", role, reason, detail)}
}

// SinkFailing is a sink that started failing, or fails for a new reason.
func SinkFailing(sink string, err error) Event {
	return Event{Type: Warning, Reason: ReasonSinkFailing, Action: actionDeliver,
		Note: fmt.Sprintf("%s failing, retrying with the newest peer set: %v", sink, err)}
}

// SinkRecovered is a failing sink that applied a set again.
func SinkRecovered(sink string) Event {
	return Event{Type: Normal, Reason: ReasonSinkRecovered, Action: actionDeliver, Note: sink + " recovered"}
}

// BootstrapTimeout is -bootstrap-timeout passing before the first
// delivery; err says what was missing.
func BootstrapTimeout(err error) Event {
	return Event{Type: Warning, Reason: ReasonBootstrapTimeout, Action: actionBootstrap, Note: fmt.Sprint(err)}
}

// DiscoverForbidden is a source's (or the -expect=auto StatefulSet
// watch's) request that RBAC forbids: verb on resource in namespace, needs
// the verbs to grant and fix how to grant them.
func DiscoverForbidden(verb, resource, namespace, needs, fix string) Event {
	return Event{Type: Warning, Reason: ReasonForbidden, Action: actionDiscover,
		Note: fmt.Sprintf("RBAC does not allow %s %s in namespace %s; grant %s: %s", verb, resource, namespace, needs, fix)}
}

// OwnPodForbidden is RBAC forbidding -expect=auto to read its own pod.
func OwnPodForbidden(err error) Event {
	return Event{Type: Warning, Reason: ReasonForbidden, Action: actionBootstrap,
		Note: fmt.Sprintf("cannot read own pod for -expect=auto, retrying: %v", err)}
}

// Recording is an Emitter that keeps the Events it is given, for tests of
// the components that emit. It is safe for concurrent use.
type Recording struct {
	mu     sync.Mutex
	events []Event
}

// Emit keeps e.
func (r *Recording) Emit(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// Events returns the Events emitted so far, in order.
func (r *Recording) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// String lists the reasons emitted so far, for test failures.
func (r *Recording) String() string {
	return fmt.Sprint(Reasons(r.Events()))
}

// Reasons returns the reasons of evs, in order.
func Reasons(evs []Event) []Reason {
	out := make([]Reason, len(evs))
	for i, e := range evs {
		out[i] = e.Reason
	}
	return out
}
