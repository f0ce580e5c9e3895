package peerfinder

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/flockd/flock/peerfinder/engine"
	"github.com/flockd/flock/peerfinder/sink"
	"github.com/flockd/flock/peerfinder/status"
)

// serverLimits bound what the clients of the metrics and health server can
// hold: connections that never finish their headers, slow requests and
// responses, idle keep-alives, and how many connections are served at once.
type serverLimits struct {
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	MaxHeaderBytes                                            int
	// MaxConns caps the connections served at once; one accepted beyond it
	// is closed unserved (see capListener).
	MaxConns int
}

// defaultServerLimits are the metrics server's limits (README, Metrics and
// health): enough for Prometheus and the kubelet's probes.
var defaultServerLimits = serverLimits{
	ReadHeaderTimeout: 5 * time.Second,
	ReadTimeout:       10 * time.Second,
	WriteTimeout:      30 * time.Second,
	IdleTimeout:       60 * time.Second,
	MaxHeaderBytes:    16 << 10,
	MaxConns:          32,
}

// serve starts the metrics and health server on addr with
// defaultServerLimits.
func serve(addr string, p *pipeline, log *slog.Logger) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listener: %w", err)
	}
	srv := serveOn(ln, p, defaultServerLimits, log)
	log.Info("serving metrics and health", "addr", ln.Addr().String())
	return srv, nil
}

// serveOn serves /metrics, /healthz (alive), /readyz (200 once the first
// set was delivered to every sink) and /status (the JSON document of
// package status, from the state /readyz reads) on ln within limits.
func serveOn(ln net.Listener, p *pipeline, limits serverLimits, log *slog.Logger) *http.Server {
	refused := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "flock_http_refused_connections_total",
		Help: "Connections to the metrics and health server closed unserved because the most it serves at once were open.",
	})
	p.registry.MustRegister(refused)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(p.registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		st := p.engine.Status()
		if !st.Delivered {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not delivered yet: %s: %s\n", st.Verdict.Reason, st.Verdict.Detail)
		} else {
			fmt.Fprintf(w, "ok: generation %d\n", st.Generation)
		}
		for _, s := range st.Sinks {
			switch {
			case s.Failing:
				fmt.Fprintf(w, "sink %s failing (holds back later sinks: %v): %s\n", s.Name, s.HoldsBack, s.Err)
			case s.Pending:
				fmt.Fprintf(w, "sink %s waiting (holds back later sinks: %v): %s\n", s.Name, s.HoldsBack, s.Err)
			}
		}
		for _, sw := range sinkWarnings(p.sinks) {
			fmt.Fprintf(w, "sink %s warning: %s\n", sw.sink, sw.text)
		}
	})
	mux.HandleFunc("/status", func(w http.ResponseWriter, _ *http.Request) {
		var warnings []string
		for _, sw := range sinkWarnings(p.sinks) {
			warnings = append(warnings, sw.sink+": "+sw.text)
		}
		b, err := json.Marshal(status.Build(p.opts.Self, p.engine.Status(), warnings))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(append(b, '\n'))
	})
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: limits.ReadHeaderTimeout,
		ReadTimeout:       limits.ReadTimeout,
		WriteTimeout:      limits.WriteTimeout,
		IdleTimeout:       limits.IdleTimeout,
		MaxHeaderBytes:    limits.MaxHeaderBytes,
	}
	go func() {
		if err := srv.Serve(newCapListener(ln, limits.MaxConns, refused)); err != nil && err != http.ErrServerClosed {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	return srv
}

// sinkWarning is a standing warning of a sink (sink.Warner).
type sinkWarning struct{ sink, text string }

// sinkWarnings are the standing warnings of sinks, in delivery order.
func sinkWarnings(sinks []engine.NamedSink) []sinkWarning {
	var out []sinkWarning
	for _, s := range sinks {
		if wr, ok := s.Sink.(sink.Warner); ok {
			for _, warning := range wr.Warnings() {
				out = append(out, sinkWarning{s.Name, warning})
			}
		}
	}
	return out
}

// capListener accepts at most max connections open at once. One accepted
// beyond that is closed at once and counted, rather than left waiting in
// the listen backlog: a burst of connections that never send a request
// then costs no file descriptors and does not queue ahead of the kubelet's
// probes, which get through as soon as a slot is free.
type capListener struct {
	net.Listener
	slots   chan struct{}
	refused prometheus.Counter
}

func newCapListener(ln net.Listener, max int, refused prometheus.Counter) *capListener {
	return &capListener{Listener: ln, slots: make(chan struct{}, max), refused: refused}
}

// Accept returns the next connection that gets a slot.
func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &slotConn{Conn: c, release: sync.OnceFunc(func() { <-l.slots })}, nil
		default:
			_ = c.Close()
			l.refused.Inc()
		}
	}
}

// slotConn frees its slot of a capListener when it is closed.
type slotConn struct {
	net.Conn
	release func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}
