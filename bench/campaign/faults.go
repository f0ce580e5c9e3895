package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/flockd/flock/localcluster"
	"github.com/flockd/flock/localcluster/apps"
)

// clusterFaults applies the campaign-wide faults to the local cluster's own
// processes, one change at a time, and keeps its control plane running.
type clusterFaults struct {
	state *localcluster.State
	// abort stops the campaign with a cause.
	abort func(error)
	done  chan struct{}

	// fault applies a node fault (localcluster.FaultNode when nil).
	fault func(ctx context.Context, stateDir, node string, fault localcluster.NodeFault) error

	mu   sync.Mutex // serializes changes to the cluster's processes
	turn sync.Mutex // held while a round's node is down
	down string     // the node a round's fault took down, with mu held
	wg   sync.WaitGroup
}

// revive restarts kube-scheduler and kube-controller-manager when they
// exited, as the supervisor of a real control plane would (the kubelet of
// static pods, systemd): kube-scheduler exits on purpose when its cache sees
// a pod on another node than it assumed, which an API server restart can
// cause under load. Any other exited process is an error.
func (f *clusterFaults) revive(ctx context.Context) error {
	for _, name := range f.state.Exited() {
		if name != "kube-scheduler" && name != "kube-controller-manager" {
			return fmt.Errorf("%s exited (see %s)", name, f.state.LogFile(name))
		}
		if err := f.state.Restart(ctx, name); err != nil {
			return err
		}
		fmt.Printf("  %s had exited (see %s); restarted\n", name, f.state.LogFile(name))
	}
	return nil
}

// every runs fn every period until stop, each run alone; an error stops
// the campaign.
func (f *clusterFaults) every(ctx context.Context, period time.Duration, fn func(context.Context) error) {
	f.wg.Go(func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-f.done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				f.mu.Lock()
				rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
				err := f.reload()
				if err == nil {
					err = fn(rctx)
				}
				cancel()
				f.mu.Unlock()
				if err != nil {
					f.abort(err)
					return
				}
			}
		}
	})
}

// periodically applies fault every period (never when period is 0) and
// prints what once it is done. A component the fault made exit is revived.
func (f *clusterFaults) periodically(ctx context.Context, period time.Duration, what string, fault func(context.Context) error) {
	if period <= 0 {
		return
	}
	f.every(ctx, period, func(ctx context.Context) error {
		err := fault(ctx)
		if err != nil && len(f.state.Exited()) > 0 {
			err = f.revive(ctx)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		fmt.Printf("  %s\n", what)
		return nil
	})
}

// stop ends the faults, waits for one in progress, and starts a node a
// round's fault left down (the round was aborted, or the campaign stopped,
// before its start): the next campaign and the tests find every node up.
func (f *clusterFaults) stop() error {
	close(f.done)
	f.wg.Wait()
	f.mu.Lock()
	node := f.down
	f.mu.Unlock()
	if node == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := f.faultNode(ctx, node, localcluster.NodeStart); err != nil {
		return fmt.Errorf("start node %s, left down by an aborted round: %w", node, err)
	}
	return nil
}

// parseSubjects reads -subjects: flock, upstream, or both.
func parseSubjects(list string) ([]string, error) {
	subs := strings.Split(list, ",")
	for _, s := range subs {
		if s != apps.Flock && s != apps.Upstream {
			return nil, fmt.Errorf("%q is not flock or upstream", s)
		}
	}
	return subs, nil
}

// faultNode applies the rounds' node faults, one node down at a time: a
// round's fault waits while another round's node is down (a stop or kill
// holds the turn until its start), so a cluster of three members never
// loses two nodes at once. Each change is serialized with the other faults,
// and the cluster's state is read again after it (the node's processes
// changed).
func (f *clusterFaults) faultNode(ctx context.Context, node string, fault localcluster.NodeFault) error {
	if fault != localcluster.NodeStart {
		f.turn.Lock()
	}
	apply := f.fault
	if apply == nil {
		apply = localcluster.FaultNode
	}
	f.mu.Lock()
	err := apply(ctx, f.state.StateDir, node, fault)
	switch {
	case err == nil && fault == localcluster.NodeStart:
		f.down = ""
	case err == nil:
		f.down = node
	}
	if rerr := f.reload(); err == nil {
		err = rerr
	}
	f.mu.Unlock()
	if fault == localcluster.NodeStart || err != nil {
		f.turn.Unlock()
	}
	if err == nil {
		fmt.Printf("  node %s: %s\n", node, fault)
	}
	return err
}

// reload reads the cluster's state again (with mu held): a node fault
// changes the processes a stale state would see as exited, and a restart
// saves the state it has.
func (f *clusterFaults) reload() error {
	// A state with an exited process comes with an error: revive's
	// business, not a reason to stop.
	s, err := localcluster.Load(f.state.StateDir)
	if s == nil {
		return err
	}
	f.state = s
	return nil
}
