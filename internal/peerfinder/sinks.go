package peerfinder

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flockd/flock/engine"
	"github.com/flockd/flock/internal/config"
	"github.com/flockd/flock/sink/hook"
)

// buildSinks creates the sinks in delivery order: files first, then hooks,
// then the exec'd main process, so each sees what the ones before it wrote.
func buildSinks(cfg *config.Config, log *slog.Logger, _ prometheus.Registerer) ([]engine.NamedSink, error) {
	var sinks []engine.NamedSink
	hk, err := hook.New(hook.Config{
		OnStart:         cfg.OnStart,
		OnChange:        cfg.OnChange,
		Timeout:         cfg.HookTimeout,
		Format:          cfg.Format,
		TrailingNewline: cfg.TrailingNewline,
		Logger:          log,
	})
	if err != nil {
		return nil, &config.UsageError{Flag: "on-start", Err: err}
	}
	sinks = append(sinks, engine.NamedSink{Name: "hook", Sink: hk})
	return sinks, nil
}
