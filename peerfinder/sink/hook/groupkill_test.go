package hook_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/peerfinder/sink/hook"
)

// TestApplyStopKillsMemberIgnoringTermAfterLeaderExits: the hook (the
// process group's leader) exits on SIGTERM, but a child it started in the
// same group ignores SIGTERM. The group is still SIGKILLed once the grace
// period has passed, so the child does not outlive the hook. Real
// processes, real signals.
func TestApplyStopKillsMemberIgnoringTermAfterLeaderExits(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	const grace = 500 * time.Millisecond
	h, _ := newHook(t, hook.Config{OnChange: helper("hang-child-ignores-term", pidFile), KillGrace: grace})
	// The hook is stopped (its context canceled, as on shutdown; a timeout
	// takes the same path) only once the child ignores SIGTERM: the child
	// writes its pid file after it did.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- h.Apply(ctx, delivery(1, false)) }()
	await.Until(t, func() bool { _, err := os.Stat(pidFile); return err == nil }, "the child to ignore SIGTERM and write its pid")
	pid := readPid(t, pidFile)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	cancel()
	err := await.Recv(t, errc, "Apply to return after cancel")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Apply = %v, want context.Canceled", err)
	}
	// It ignores SIGTERM: only the SIGKILL after the grace ends it.
	awaitGone(t, pid, "after the hook, its group leader, exited on SIGTERM (SIGKILLed after the grace)")
}
