package engine

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the engine's Prometheus collectors. A nil *Metrics records nothing.
type Metrics struct {
	peers         prometheus.Gauge
	generation    prometheus.Gauge
	verdict       *prometheus.GaugeVec
	snapshots     *prometheus.CounterVec
	applies       *prometheus.CounterVec
	applyDuration *prometheus.HistogramVec
	firstDelivery prometheus.Gauge
	sinkFailing   *prometheus.GaugeVec
}

// NewMetrics creates the engine's collectors and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		peers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "flock_peers", Help: "Peers visible in the merged set of all sources.",
		}),
		generation: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "flock_published_generation", Help: "Generation of the last published peer set.",
		}),
		verdict: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flock_membership_verdict", Help: "1 for the current membership verdict (publish or the gate that holds delivery back).",
		}, []string{"reason"}),
		snapshots: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flock_source_snapshots_total", Help: "Snapshots received from each source.",
		}, []string{"source"}),
		applies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flock_sink_applies_total", Help: "Sink applies by result (success, failure, pending).",
		}, []string{"sink", "result"}),
		applyDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "flock_sink_apply_duration_seconds", Help: "Duration of sink applies (hook runs, file writes).",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"sink"}),
		firstDelivery: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "flock_first_delivery_seconds", Help: "Seconds from start until every sink applied the first set (time to self/quorum).",
		}),
		sinkFailing: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flock_sink_failing", Help: "1 while the sink's last apply failed (a hosts file that cannot be written, a failing hook).",
		}, []string{"sink"}),
	}
	reg.MustRegister(m.peers, m.generation, m.verdict, m.snapshots, m.applies, m.applyDuration, m.firstDelivery, m.sinkFailing)
	return m
}
