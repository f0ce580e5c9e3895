package engine

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flockd/flock/internal/testing/logtest"
	"github.com/flockd/flock/peerfinder/membership"
	"github.com/flockd/flock/peerfinder/sink"
	"github.com/flockd/flock/peerfinder/source/static"
)

// gated is a recorder that declares whether its failure holds back later sinks.
type gated struct {
	*recorder
	holds bool
}

func (g gated) HoldsBack() bool { return g.holds }

// A failing sink that does not hold back later sinks (a hosts file without
// -wait-for-all) lets them run, is retried with the newest set, and shows in
// Status, in metrics and in one log line per state change (issue 11 #17).
func TestFailingIndependentSinkDoesNotBlockLaterSinks(t *testing.T) {
	var mu sync.Mutex
	broken := true
	isBroken := func(sink.Delivery) bool { mu.Lock(); defer mu.Unlock(); return broken }
	files := gated{recorder: &recorder{name: "hosts-file", fail: isBroken}, holds: false}
	hook := &recorder{name: "hook"}
	logs := logtest.New()
	reg := prometheus.NewRegistry()
	e := New(Config{
		Sources:    []NamedSource{{"static", static.Source{Peers: names("web-0")}}},
		Sinks:      []NamedSink{{"hosts-file", files}, {"hook", hook}},
		Membership: membership.Options{Self: self},
		RetryMin:   time.Millisecond, RetryMax: 5 * time.Millisecond,
		Logger:  logs.Logger(),
		Metrics: NewMetrics(reg),
	})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- e.Run(ctx) }()
	defer func() { cancel(); <-errc }()

	waitStatus(t, e, func(s Status) bool { return len(hook.delivered()) == 1 && failing(s, "hosts-file") })
	if recs := logs.Find("sink failing"); len(recs) != 1 || recs[0].Attrs["sink"] != "hosts-file" {
		t.Errorf("'sink failing' records %v, want one for hosts-file's change of state", recs)
	}
	if v := gaugeValue(t, reg, "flock_sink_failing", "hosts-file"); v != 1 {
		t.Errorf("flock_sink_failing{sink=hosts-file} = %v, want 1", v)
	}
	mu.Lock()
	broken = false
	mu.Unlock()
	waitStatus(t, e, func(s Status) bool { return s.Delivered && !failing(s, "hosts-file") })
	if recs := logs.Find("sink recovered"); len(recs) != 1 || recs[0].Attrs["sink"] != "hosts-file" {
		t.Errorf("'sink recovered' records %v, want one for hosts-file", recs)
	}
	if v := gaugeValue(t, reg, "flock_sink_failing", "hosts-file"); v != 0 {
		t.Errorf("flock_sink_failing{sink=hosts-file} = %v after recovery, want 0", v)
	}
	if n := len(hook.delivered()); n != 1 {
		t.Errorf("hook applied %d times, want once (the set did not change)", n)
	}
}

// A failing sink that holds back (the default) still holds back later ones.
func TestFailingHoldingSinkBlocksLaterSinks(t *testing.T) {
	var calls []string
	files := gated{recorder: &recorder{name: "json-file", log: &calls, fail: func(sink.Delivery) bool { return true }}, holds: true}
	hook := &recorder{name: "hook"}
	e := New(Config{
		Sources:    []NamedSource{{"static", static.Source{Peers: names("web-0")}}},
		Sinks:      []NamedSink{{"json-file", files}, {"hook", hook}},
		Membership: membership.Options{Self: self},
		RetryMin:   time.Millisecond, RetryMax: 2 * time.Millisecond,
	})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- e.Run(ctx) }()
	defer func() { cancel(); <-errc }()
	waitStatus(t, e, func(s Status) bool { return failing(s, "json-file") && files.calls() >= 5 })
	if n := len(hook.delivered()); n != 0 {
		t.Errorf("hook applied %d times behind a failing holding sink, want 0", n)
	}
}

func failing(s Status, name string) bool {
	for _, ss := range s.Sinks {
		if ss.Name == name {
			return ss.Failing
		}
	}
	return false
}

func (r *recorder) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(*r.log)
}

func (r *recorder) delivered() []sink.Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sink.Delivery(nil), r.got...)
}

func gaugeValue(t *testing.T, reg *prometheus.Registry, name, sinkName string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "sink" && l.GetValue() == sinkName {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	var b bytes.Buffer
	for _, mf := range mfs {
		b.WriteString(mf.GetName() + " ")
	}
	t.Fatalf("no %s{sink=%q}; have %s", name, sinkName, b.String())
	return 0
}
