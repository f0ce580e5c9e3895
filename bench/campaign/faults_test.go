package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/flockd/flock/localcluster"
)

// TestFaultNodeOneDownAtATime: a stop or kill holds the turn until its
// node is started again, so a second round's fault waits; a fault that
// failed gives the turn back.
func TestFaultNodeOneDownAtATime(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(`{"stateDir":"`+dir+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var calls []string
	fail := errors.New("refused")
	f := &clusterFaults{state: &localcluster.State{StateDir: dir},
		fault: func(_ context.Context, stateDir, node string, fault localcluster.NodeFault) error {
			if stateDir != dir {
				t.Errorf("state dir %q, want %q", stateDir, dir)
			}
			calls = append(calls, string(fault)+" "+node)
			if node == "bad" {
				return fail
			}
			return nil
		}}
	ctx := context.Background()
	if err := f.faultNode(ctx, "real-1", localcluster.NodeKill); err != nil {
		t.Fatal(err)
	}
	if f.turn.TryLock() {
		t.Fatal("real-1 is down and another node's fault may start")
	}
	if err := f.faultNode(ctx, "real-1", localcluster.NodeStart); err != nil {
		t.Fatal(err)
	}
	if !f.turn.TryLock() {
		t.Fatal("real-1 is back and the turn is still held")
	}
	f.turn.Unlock()
	if err := f.faultNode(ctx, "bad", localcluster.NodeStop); !errors.Is(err, fail) {
		t.Fatalf("a refused stop: %v", err)
	}
	if !f.turn.TryLock() {
		t.Fatal("a stop that failed kept the turn")
	}
	f.turn.Unlock()
	if want := []string{"kill real-1", "start real-1", "stop bad"}; !slices.Equal(calls, want) {
		t.Errorf("calls %q, want %q", calls, want)
	}
}

// A node a round took down is started again when the campaign stops
// before the round's own start (an aborted round, a signal).
func TestStopStartsTheNodeLeftDown(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(`{"stateDir":"`+dir+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var calls []string
	f := &clusterFaults{state: &localcluster.State{StateDir: dir}, done: make(chan struct{}),
		fault: func(_ context.Context, _, node string, fault localcluster.NodeFault) error {
			calls = append(calls, string(fault)+" "+node)
			return nil
		}}
	ctx := context.Background()
	for _, step := range []struct {
		node  string
		fault localcluster.NodeFault
	}{{"real-0", localcluster.NodeStop}, {"real-0", localcluster.NodeStart}, {"real-2", localcluster.NodeKill}} {
		if err := f.faultNode(ctx, step.node, step.fault); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.stop(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"stop real-0", "start real-0", "kill real-2", "start real-2"}; !slices.Equal(calls, want) {
		t.Errorf("calls %q, want %q", calls, want)
	}
	if !f.turn.TryLock() {
		t.Error("the turn is still held after the node's start")
	}
}
