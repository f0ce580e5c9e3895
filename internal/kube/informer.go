package kube

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// syncPoll is how often Run checks whether the initial list is complete.
const syncPoll = 10 * time.Millisecond

// Watcher is the informer loop of the Kubernetes API readers, for any
// snapshot type S: the peer sources (peerfinder/source/kubesource) and
// -expect=auto's StatefulSet watch share it, and so share its slim
// objects, coalescing and, through a Reporter's ListerWatcher, failure
// reporting and metrics.
//
// Only slim objects are cached: Transform converts each API object before
// it enters the store. Relists (after an apiserver restart, a watch expiry
// with 410 Gone, or a network failure) replace the store in one step —
// client-go's AtomicFIFO, on by default since v1.36 — so a snapshot is
// either the old complete state or the new one, never a mix. While list and
// watch fail nothing is emitted.
type Watcher[S any] struct {
	ListerWatcher ListerWatcher
	ObjectType    runtime.Object
	// Transform converts each API object before it enters the store; it
	// must return an already converted object unchanged.
	Transform cache.TransformFunc
	// Snapshot computes a snapshot from the whole store. It is pure.
	Snapshot func(objs []any) S
	// Equal reports whether two snapshots are the same.
	Equal  func(a, b S) bool
	Logger *slog.Logger
}

// Run emits the first snapshot once the initial list is complete, then one
// snapshot per burst of changes that alters it: events only poke a
// capacity-1 trigger, and each wake-up rebuilds from the store, so a burst
// of events costs one rebuild and at most one emit. emit returns false when
// ctx ended while it waited. Run returns nil when ctx ends, after the
// informer's goroutines have stopped.
func (w Watcher[S]) Run(ctx context.Context, emit func(ctx context.Context, s S) bool) error {
	log := w.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	trigger := make(chan struct{}, 1)
	poke := func() {
		select {
		case trigger <- struct{}{}:
		default:
		}
	}
	inf := cache.NewSharedIndexInformerWithOptions(w.ListerWatcher, w.ObjectType, cache.SharedIndexInformerOptions{})
	// Failures are reported once per change of state by the Reporter that
	// wraps the ListerWatcher; the reflector's own report (an error log per
	// retry) goes to debug.
	if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		log.Debug("list or watch failed; retrying with backoff", "err", err)
	}); err != nil {
		return fmt.Errorf("informer: %w", err)
	}
	if err := inf.SetTransform(w.Transform); err != nil {
		return fmt.Errorf("informer: %w", err)
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	}); err != nil {
		return fmt.Errorf("informer: %w", err)
	}
	store := inf.GetStore()
	ctx, cancel := context.WithCancel(klog.NewContext(ctx, Logr(log)))
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { inf.RunWithContext(ctx) })

	tick := time.NewTicker(syncPoll)
	for !inf.HasSynced() {
		select {
		case <-ctx.Done():
			tick.Stop()
			return nil
		case <-tick.C:
		}
	}
	tick.Stop()
	log.Debug("initial list complete", "objects", len(store.List()))

	var last S
	first := true
	for {
		s := w.Snapshot(store.List())
		if first || !w.Equal(s, last) {
			if !emit(ctx, s) {
				return nil
			}
			first, last = false, s
		}
		select {
		case <-trigger:
		case <-ctx.Done():
			return nil
		}
	}
}
