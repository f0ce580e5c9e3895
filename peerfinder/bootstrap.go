package peerfinder

import (
	"context"
	"errors"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flockd/flock/peerfinder/bootstrap"
	"github.com/flockd/flock/peerfinder/config"
	"github.com/flockd/flock/peerfinder/engine"
	"github.com/flockd/flock/peerfinder/events"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
)

// bootstrapParts is what the bootstrap flags add to the engine: a live
// expected size (-expect=auto) and the form/join role (-cluster-lease).
type bootstrapParts struct {
	replicas *bootstrap.Replicas // nil unless -expect=auto
	roler    *bootstrap.Roler
	kube     *kubeClient
	ns, pod  string
}

func buildBootstrap(cfg *config.Config, log *slog.Logger, reg prometheus.Registerer, kc *kubeClient, em events.Emitter) (*bootstrapParts, error) {
	b := &bootstrapParts{kube: kc, ns: cfg.Namespace, pod: cfg.Bootstrap.PodName}
	b.roler = &bootstrap.Roler{Pod: cfg.Bootstrap.PodName, UID: cfg.Bootstrap.PodUID, Logger: log, Events: em}
	if !cfg.Bootstrap.NeedsAPI() {
		return b, nil
	}
	client, err := kc.Get()
	if err != nil {
		return nil, err
	}
	if cfg.Bootstrap.ExpectAuto {
		b.replicas = &bootstrap.Replicas{Client: client, Namespace: cfg.Namespace, Pod: cfg.Bootstrap.PodName, InitMode: cfg.InitMode(),
			Logger: log.With("component", "expect"), Metrics: kc.Metrics(reg), Events: em, OnForbidden: forbiddenEvents(em)}
		b.roler.FirstOrdinal = b.replicas.FirstOrdinal
	}
	if cfg.Bootstrap.ClusterLease != "" {
		b.roler.Lease = &bootstrap.Lease{Leases: client.Leases, Namespace: cfg.Namespace, Name: cfg.Bootstrap.ClusterLease}
		b.roler.Data = &bootstrap.Data{Client: client, Namespace: cfg.Namespace}
	}
	if argv := cfg.Bootstrap.FormRankArgv(); argv != nil {
		b.roler.Rank, b.roler.RankQuorum = bootstrap.RankCommand(argv), cfg.Bootstrap.FormRankQuorum
		b.roler.Size = func() int { return cfg.Bootstrap.Expect }
		if b.replicas != nil {
			b.roler.Size = b.replicas.Size
		}
	}
	return b, nil
}

// sizeSource returns the engine's live expected size, or nil.
func (b *bootstrapParts) sizeSource() engine.SizeSource {
	if b.replicas == nil {
		return nil
	}
	return b.replicas
}

// role is the engine's RoleFunc. Ranks awaited (-form-rank) are a pending
// result: the engine re-checks every sink.PendingInterval without backoff or
// warning, so the role follows soon after the last rank.
func (b *bootstrapParts) role(ctx context.Context, set peer.Set, self string) (role, former string, err error) {
	role, former, err = b.roler.Bootstrap(ctx, set, self)
	if errors.Is(err, bootstrap.ErrRankAwaited) {
		return "", "", sink.Pending(err)
	}
	return role, former, err
}
