package peerfinder

import (
	"context"
	"log/slog"

	"github.com/flockd/flock/internal/kube"
	"github.com/flockd/flock/peerfinder/config"
	"github.com/flockd/flock/peerfinder/events"
	"github.com/flockd/flock/peerfinder/events/recorder"
)

// startEvents starts posting Events on this pod when -events says so and
// returns the Emitter and a stop function that sends what is queued; the
// Emitter is events.Nop when Events are off. Diagnose mode never posts.
func startEvents(ctx context.Context, cfg *config.Config, kc *kubeClient, log *slog.Logger) (events.Emitter, func()) {
	if !cfg.EventsEnabled() || cfg.Diagnose {
		return events.Nop{}, func() {}
	}
	client, err := kc.Get()
	if err != nil {
		log.Warn("no events: cannot build a Kubernetes client", "err", err)
		return events.Nop{}, func() {}
	}
	r := recorder.Start(ctx, client, cfg.Namespace, cfg.Bootstrap.PodName, cfg.Bootstrap.PodUID, log)
	return r, r.Stop
}

// forbiddenEvents is the kube.Reporter callback of the sources and the
// -expect=auto StatefulSet watch: a forbidden request is a Forbidden Event.
func forbiddenEvents(em events.Emitter) func(kube.Forbidden) {
	em = events.OrNop(em)
	return func(f kube.Forbidden) {
		em.Emit(events.DiscoverForbidden(f.Verb, f.Resource, f.Namespace, f.Needs, f.Fix))
	}
}
