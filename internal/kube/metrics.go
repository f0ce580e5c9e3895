package kube

import (
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Metrics are the counters of the Kubernetes API sources' list and watch
// requests, labelled by resource (e.g. "endpointslices.discovery.k8s.io").
// Create them with NewMetrics; one Metrics may be shared by several sources.
// A nil *Metrics records nothing.
type Metrics struct {
	// Failures counts failed requests by resource, verb ("list", "watch",
	// "get") and Reason.
	Failures *prometheus.CounterVec
	// Relists counts full lists after the first successful one: after a
	// watch expired (410 Gone), the apiserver restarted or the network
	// failed. Each costs a full read of the resource.
	Relists *prometheus.CounterVec
	// Failing is 1 while a resource's requests are failing, else 0.
	Failing *prometheus.GaugeVec
}

// NewMetrics creates the metrics and registers them with reg when reg is not nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flock_kube_list_watch_failures_total",
			Help: "Failed Kubernetes API requests of the endpointslice and pods sources and the -expect=auto StatefulSet watch, by resource, verb and reason (forbidden, unauthorized, expired, unavailable, other).",
		}, []string{"resource", "verb", "reason"}),
		Relists: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flock_kube_relists_total",
			Help: "Full lists after the first successful one (watch expired, apiserver restart, network failure), by resource.",
		}, []string{"resource"}),
		Failing: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flock_kube_list_watch_failing",
			Help: "1 while the Kubernetes API requests for a resource are failing (the last peer set is kept), else 0.",
		}, []string{"resource"}),
	}
	if reg != nil {
		reg.MustRegister(m.Failures, m.Relists, m.Failing)
	}
	return m
}

func (m *Metrics) failed(resource, verb string, err error) {
	if m == nil {
		return
	}
	m.Failures.WithLabelValues(resource, verb, Reason(err)).Inc()
	m.Failing.WithLabelValues(resource).Set(1)
}

func (m *Metrics) succeeded(resource string) {
	if m == nil {
		return
	}
	m.Failing.WithLabelValues(resource).Set(0)
}

func (m *Metrics) relisted(resource string) {
	if m == nil {
		return
	}
	m.Relists.WithLabelValues(resource).Inc()
}

// Reason classifies an API error for metrics: "forbidden", "unauthorized",
// "expired" (410 Gone: the resource version is too old), "unavailable"
// (the apiserver cannot be reached, is overloaded or timed out) or "other".
func Reason(err error) string {
	var netErr net.Error
	switch {
	case apierrors.IsForbidden(err):
		return "forbidden"
	case apierrors.IsUnauthorized(err):
		return "unauthorized"
	case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
		return "expired"
	case apierrors.IsServiceUnavailable(err), apierrors.IsTimeout(err), apierrors.IsServerTimeout(err),
		apierrors.IsTooManyRequests(err), apierrors.IsInternalError(err),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.As(err, &netErr):
		return "unavailable"
	}
	return "other"
}
