package peerfinder

import (
	"context"
	"fmt"
	"log/slog"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flockd/flock/peerfinder/bootstrap"
	"github.com/flockd/flock/peerfinder/config"
	"github.com/flockd/flock/peerfinder/engine"
	"github.com/flockd/flock/peerfinder/peer"
)

// bootstrapParts is what the bootstrap flags add to the engine: a live
// expected size (-expect=auto) and the form/join role (-cluster-lease).
type bootstrapParts struct {
	replicas *bootstrap.Replicas // nil unless -expect=auto
	roler    *bootstrap.Roler
	kube     *kubeClient
	ns, pod  string
}

func buildBootstrap(cfg *config.Config, log *slog.Logger, kc *kubeClient) (*bootstrapParts, error) {
	b := &bootstrapParts{kube: kc, ns: cfg.Namespace, pod: cfg.Bootstrap.PodName}
	b.roler = &bootstrap.Roler{Pod: cfg.Bootstrap.PodName, UID: cfg.Bootstrap.PodUID, Logger: log}
	if !cfg.Bootstrap.NeedsAPI() {
		return b, nil
	}
	client, err := kc.Get()
	if err != nil {
		return nil, err
	}
	if cfg.Bootstrap.ExpectAuto {
		b.replicas = &bootstrap.Replicas{Client: client, Namespace: cfg.Namespace, Pod: cfg.Bootstrap.PodName, Logger: log.With("component", "expect")}
		b.roler.FirstOrdinal = b.replicas.FirstOrdinal
	}
	if cfg.Bootstrap.ClusterLease != "" {
		b.roler.Lease = &bootstrap.Lease{Client: client.CoordinationV1(), Namespace: cfg.Namespace, Name: cfg.Bootstrap.ClusterLease}
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

// role is the engine's RoleFunc. With a cluster Lease and no $POD_UID it
// first reads this pod's UID from the API (once).
func (b *bootstrapParts) role(ctx context.Context, set peer.Set, self string) (string, error) {
	if b.roler.Lease != nil && b.roler.UID == "" {
		uid, err := b.podUID(ctx)
		if err != nil {
			return "", err
		}
		b.roler.UID = uid
	}
	return b.roler.Role(ctx, set, self)
}

func (b *bootstrapParts) podUID(ctx context.Context) (string, error) {
	client, err := b.kube.Get()
	if err != nil {
		return "", err
	}
	pod, err := client.CoreV1().Pods(b.ns).Get(ctx, b.pod, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("read pod %s/%s for its UID (or set POD_UID from the downward API, fieldPath metadata.uid): %w", b.ns, b.pod, err)
	}
	return string(pod.UID), nil
}
