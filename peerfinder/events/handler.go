package events

import (
	"context"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
)

// The log messages that become Events, as the components log them (their
// test checks each is still logged somewhere).
const (
	msgDelivered     = "peers delivered"                                                                           // engine
	msgRole          = "bootstrap role"                                                                            // bootstrap.Roler
	msgSinkFailing   = "sink failing"                                                                              // engine
	msgSinkRecovered = "sink recovered"                                                                            // engine
	msgTimeout       = "giving up"                                                                                 // peerfinder.Main, on the bootstrap timeout
	msgForbidden     = "kubernetes API forbids reading peers; keeping the last peer set and retrying with backoff" // kube.Reporter
	msgOwnPod        = "cannot read own pod for -expect=auto, retrying"                                            // bootstrap.Replicas
)

// Of maps a log record (its message and attributes) to the Event it
// stands for, if any. first is whether no delivery was seen before: only
// the first "peers delivered" is an Event. It is pure.
func Of(msg string, attrs map[string]string, first bool) (Event, bool) {
	a := func(k string) string { return attrs[k] }
	switch msg {
	case msgDelivered:
		if !first {
			return Event{}, false
		}
		note := fmt.Sprintf("first peer set delivered: %s peers (generation %s)", a("peers"), a("generation"))
		if r := a("role"); r != "" {
			note += ", bootstrap role " + r
		}
		return Event{Type: corev1.EventTypeNormal, Reason: "PeersDelivered", Action: "Deliver", Note: note}, true
	case msgRole:
		return Event{Type: corev1.EventTypeNormal, Reason: "BootstrapRole", Action: "Bootstrap",
			Note: fmt.Sprintf("%s (%s): %s", a("role"), a("reason"), a("detail"))}, true
	case msgSinkFailing:
		return Event{Type: corev1.EventTypeWarning, Reason: "SinkFailing", Action: "Deliver",
			Note: fmt.Sprintf("%s failing, retrying with the newest peer set: %s", a("sink"), a("err"))}, true
	case msgSinkRecovered:
		return Event{Type: corev1.EventTypeNormal, Reason: "SinkRecovered", Action: "Deliver",
			Note: a("sink") + " recovered"}, true
	case msgTimeout:
		return Event{Type: corev1.EventTypeWarning, Reason: "BootstrapTimeout", Action: "Bootstrap", Note: a("err")}, true
	case msgForbidden:
		return Event{Type: corev1.EventTypeWarning, Reason: "Forbidden", Action: "Discover",
			Note: fmt.Sprintf("RBAC does not allow %s %s in namespace %s; grant %s: %s", a("verb"), a("resource"), a("namespace"), a("needs"), a("fix"))}, true
	case msgOwnPod:
		if a("forbidden") != "true" {
			return Event{}, false
		}
		return Event{Type: corev1.EventTypeWarning, Reason: "Forbidden", Action: "Bootstrap",
			Note: fmt.Sprintf("%s: %s", msg, a("err"))}, true
	}
	return Event{}, false
}

// Handler returns a slog.Handler that passes every record to next and
// posts the Events that records stand for (see Of).
func (r *Recorder) Handler(next slog.Handler) slog.Handler {
	return &handler{next: next, r: r}
}

type handler struct {
	next slog.Handler
	r    *Recorder
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || h.next.Enabled(ctx, l)
}

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	if rec.Level >= slog.LevelInfo {
		h.post(rec)
	}
	if !h.next.Enabled(ctx, rec.Level) {
		return nil
	}
	return h.next.Handle(ctx, rec)
}

func (h *handler) post(rec slog.Record) {
	switch rec.Message {
	case msgDelivered, msgRole, msgSinkFailing, msgSinkRecovered, msgTimeout, msgForbidden, msgOwnPod:
	default:
		return
	}
	attrs := map[string]string{}
	rec.Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value.Resolve().String()
		return true
	})
	first := false
	if rec.Message == msgDelivered {
		first = h.r.delivered.CompareAndSwap(false, true)
	}
	if e, ok := Of(rec.Message, attrs, first); ok {
		h.r.Post(e)
	}
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	return &handler{next: h.next.WithAttrs(as), r: h.r}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{next: h.next.WithGroup(name), r: h.r}
}
