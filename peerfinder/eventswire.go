package peerfinder

import (
	"context"
	"log/slog"

	"github.com/flockd/flock/peerfinder/config"
	"github.com/flockd/flock/peerfinder/events"
)

// startEvents starts posting Events on this pod when -events says so, or
// returns nil. Diagnose mode never posts.
func startEvents(ctx context.Context, cfg *config.Config, kc *kubeClient, log *slog.Logger) *events.Recorder {
	if !cfg.EventsEnabled() || cfg.Diagnose {
		return nil
	}
	client, err := kc.Get()
	if err != nil {
		log.Warn("no events: cannot build a Kubernetes client", "err", err)
		return nil
	}
	return events.Start(ctx, client, cfg.Namespace, cfg.Bootstrap.PodName, cfg.Bootstrap.PodUID, log)
}
