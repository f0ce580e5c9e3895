// Package kubesource is what the Kubernetes API sources (endpointslice,
// pods) share: an Informer that turns a watched resource into complete
// peer snapshots, on internal/kube's Watcher.
package kubesource

import (
	"context"
	"fmt"
	"log/slog"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/flockd/flock/internal/kube"
	"github.com/flockd/flock/peerfinder/peer"
)

// Informer turns a watched resource into complete peer snapshots. Sources
// fill it in; Run implements source.Source.Run.
//
// Only slim objects are cached: Transform converts each API object before it
// enters the store (it must accept an already converted object and return it
// unchanged). Snapshots are computed from the whole store, never from single
// events, by Peers, a pure function.
//
// Relists (after an apiserver restart, a watch expiry with 410 Gone, or a
// network failure) replace the store in one step — client-go's AtomicFIFO,
// on by default since v1.36, applies a relist as one transaction before any
// handler runs — so a snapshot is either the old complete set or the new
// complete set, never a mix. While list and watch fail nothing is sent and
// the consumer keeps the last set.
type Informer struct {
	ListerWatcher kube.ListerWatcher
	ObjectType    runtime.Object
	Transform     cache.TransformFunc
	Peers         func(objs []any) []peer.Peer
	Logger        *slog.Logger
}

// Run sends the first snapshot once the initial list is complete, then one
// snapshot per burst of changes that alters the set (see kube.Watcher.Run). It
// returns nil when ctx ends, after the informer's goroutines have stopped.
func (in Informer) Run(ctx context.Context, up chan<- []peer.Peer) error {
	type snapshot struct {
		peers []peer.Peer
		set   peer.Set
	}
	return kube.Watcher[snapshot]{
		ListerWatcher: in.ListerWatcher, ObjectType: in.ObjectType, Transform: in.Transform, Logger: in.Logger,
		Snapshot: func(objs []any) snapshot {
			ps := in.Peers(objs)
			return snapshot{ps, peer.NewSet(ps...)}
		},
		Equal: func(a, b snapshot) bool { return a.set.Equal(b.set) },
	}.Run(ctx, func(ctx context.Context, s snapshot) bool {
		select {
		case up <- s.peers:
			return true
		case <-ctx.Done():
			return false
		}
	})
}

// Lookup lists the resource once and returns the peers: a synchronous
// answer for diagnose mode.
func (in Informer) Lookup(ctx context.Context) ([]peer.Peer, error) {
	list, err := in.ListerWatcher.ListWithContext(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, fmt.Errorf("read list: %w", err)
	}
	objs := make([]any, 0, len(items))
	for _, it := range items {
		o, err := in.Transform(it)
		if err != nil {
			return nil, err
		}
		objs = append(objs, o)
	}
	return in.Peers(objs), nil
}
