package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/peerfinder/membership"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
)

// TestMetrics drives two deliveries on a clock the test sets and reads the
// engine's collectors: the first-delivery time is that of the first set
// only, the rest follow every set.
func TestMetrics(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var now atomic.Int64
	now.Store(t0.UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	src := chanSource{in: make(chan []peer.Peer)}
	rec := &recorder{events: make(chan sink.Delivery, 10)}
	e := New(Config{
		Sources:    []NamedSource{{"test", src}},
		Sinks:      []NamedSink{{"rec", rec}},
		Membership: membership.Options{Self: self},
		Metrics:    m,
		Now:        clock,
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- e.Run(ctx) }()

	// Taken by the source: Run has started (and read its start time).
	await.Send(t, src.in, names("web-1"), "a set without self")
	waitVerdict(t, e, membership.WaitSelf, 1)
	now.Store(t0.Add(3 * time.Second).UnixNano())
	if got := testutil.ToFloat64(m.verdict.WithLabelValues(string(membership.WaitSelf))); got != 1 {
		t.Errorf("verdict %s = %v, want 1", membership.WaitSelf, got)
	}
	await.Send(t, src.in, names("web-0", "web-1"), "the first set")
	await.Recv(t, rec.events, "the first delivery")
	await.Until(t, func() bool { return testutil.ToFloat64(m.firstDelivery) != 0 }, "flock_first_delivery_seconds to be set")
	now.Store(t0.Add(10 * time.Second).UnixNano())
	await.Send(t, src.in, names("web-0", "web-1", "web-2"), "the second set")
	await.Recv(t, rec.events, "the second delivery")
	cancel()
	if err := await.Recv(t, errc, "Run to return after cancel"); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"flock_first_delivery_seconds", testutil.ToFloat64(m.firstDelivery), 3},
		{"flock_published_generation", testutil.ToFloat64(m.generation), 2},
		{"flock_peers", testutil.ToFloat64(m.peers), 3},
		{"flock_source_snapshots_total", testutil.ToFloat64(m.snapshots.WithLabelValues("test")), 3},
		{"flock_sink_applies_total success", testutil.ToFloat64(m.applies.WithLabelValues("rec", "success")), 2},
		{"flock_membership_verdict publish", testutil.ToFloat64(m.verdict.WithLabelValues(string(membership.Publish))), 1},
		{"flock_membership_verdict self-not-found", testutil.ToFloat64(m.verdict.WithLabelValues(string(membership.WaitSelf))), 0},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	var h dto.Metric
	if err := m.applyDuration.WithLabelValues("rec").(prometheus.Histogram).Write(&h); err != nil {
		t.Fatal(err)
	}
	if n := h.GetHistogram().GetSampleCount(); n != 2 {
		t.Errorf("flock_sink_apply_duration_seconds{sink=rec} has %d samples, want 2", n)
	}
}
