package peerfinder

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flockd/flock/engine"
	"github.com/flockd/flock/internal/config"
	dnssource "github.com/flockd/flock/source/dns"
)

// buildSources creates the sources the command line asks for.
func buildSources(cfg *config.Config, log *slog.Logger, reg prometheus.Registerer) ([]engine.NamedSource, error) {
	dnsSrc, err := dnssource.New(dnssource.Config{
		Name:    cfg.ServiceFQDN(),
		Servers: cfg.DNSServers,
		Period:  cfg.PollPeriod,
		Logger:  log.With("source", "dns"),
		Metrics: dnssource.NewMetrics(reg),
	})
	if err != nil {
		return nil, err
	}
	return []engine.NamedSource{{Name: "dns", Source: dnsSrc}}, nil
}
