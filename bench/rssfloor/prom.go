//go:build !noprom

package main

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func metricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rssfloor_deliveries_total", Help: "Deliveries."}, []string{"source"})
	reg.MustRegister(c)
	c.WithLabelValues("endpointslice").Inc()
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}
