package peerfinder

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// serve starts the metrics and health server: /metrics, /healthz (alive)
// and /readyz (200 once the first set was delivered to every sink).
func serve(addr string, p *pipeline, log *slog.Logger) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listener: %w", err)
	}
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
	})
	srv := &http.Server{Handler: mux}
	go func() {
		if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	log.Info("serving metrics and health", "addr", ln.Addr().String())
	return srv, nil
}
