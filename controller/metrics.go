package controller

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	flockv1 "github.com/flockd/flock/api/v1alpha1"
)

// MemberMetrics export each Flock's members as its last written status
// shows them, one series per active member:
//
//	flock_member_ready{namespace,flock,member,node}                  1 Ready, 0 not
//	flock_member_waiting_since_seconds{namespace,flock,member,node,reason}
//	                                                                 status.members[].waitingSince (Unix seconds), while it waits
//
// Record replaces a Flock's series, Forget removes them. Safe for
// concurrent use. A nil *MemberMetrics records nothing.
type MemberMetrics struct {
	ready, waitingSince *prometheus.GaugeVec
}

// NewMemberMetrics creates the collectors and registers them with reg.
func NewMemberMetrics(reg prometheus.Registerer) (*MemberMetrics, error) {
	m := &MemberMetrics{
		ready: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flock_member_ready",
			Help: "1 while the Flock member's pod is Ready, else 0 (active members; node empty until placed).",
		}, []string{"namespace", "flock", "member", "node"}),
		waitingSince: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flock_member_waiting_since_seconds",
			Help: "When the Flock member started waiting (status.members[].waitingSince, Unix seconds), by reason (status.members[].waiting); absent while it does not wait.",
		}, []string{"namespace", "flock", "member", "node", "reason"}),
	}
	for _, c := range []prometheus.Collector{m.ready, m.waitingSince} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register flock member metrics: %w", err)
		}
	}
	return m, nil
}

var (
	sharedMetricsOnce sync.Once
	sharedMetrics     *MemberMetrics
	sharedMetricsErr  error
)

// sharedMemberMetrics are the MemberMetrics on controller-runtime's
// registry, which /metrics serves. The registry is global: every manager
// of a process (tests start several) shares them.
func sharedMemberMetrics() (*MemberMetrics, error) {
	sharedMetricsOnce.Do(func() {
		sharedMetrics, sharedMetricsErr = NewMemberMetrics(metrics.Registry)
	})
	return sharedMetrics, sharedMetricsErr
}

// Record makes the Flock's series those of its members in st.
func (m *MemberMetrics) Record(namespace, name string, st flockv1.FlockStatus) {
	if m == nil {
		return
	}
	m.Forget(namespace, name)
	for _, mem := range st.Members {
		if !mem.Active {
			continue
		}
		member := strconv.Itoa(int(mem.Ordinal))
		ready := 0.0
		if mem.Ready {
			ready = 1
		}
		m.ready.WithLabelValues(namespace, name, member, mem.Node).Set(ready)
		if mem.Waiting != "" && mem.WaitingSince != nil {
			m.waitingSince.WithLabelValues(namespace, name, member, mem.Node, mem.Waiting).Set(float64(mem.WaitingSince.Unix()))
		}
	}
}

// Forget removes the Flock's series (it was deleted).
func (m *MemberMetrics) Forget(namespace, name string) {
	if m == nil {
		return
	}
	match := prometheus.Labels{"namespace": namespace, "flock": name}
	m.ready.DeletePartialMatch(match)
	m.waitingSince.DeletePartialMatch(match)
}
