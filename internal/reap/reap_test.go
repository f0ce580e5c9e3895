package reap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/flockd/flock/internal/testing/await"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitZombies waits until this process has want zombie children and
// returns them.
func waitZombies(t *testing.T, want int) []int {
	t.Helper()
	var z []int
	await.Check(t, func() error {
		if z = zombies(t); len(z) != want {
			return fmt.Errorf("zombie children %v", z)
		}
		return nil
	}, "%d zombie children", want)
	return z
}

// zombies returns the zombie children of this process now.
func zombies(t *testing.T) []int {
	t.Helper()
	z, err := zombieChildren()
	if err != nil {
		t.Fatal(err)
	}
	return z
}

func TestPassLeavesExecCmdChildren(t *testing.T) {
	// A child started by exec.Cmd has exited but nobody called Wait yet: an
	// aggressive pass (no grace) must leave it, so Wait gets its status.
	cmd := exec.Command("sh", "-c", "exit 7")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if z := waitZombies(t, 1); z[0] != cmd.Process.Pid {
		t.Fatalf("zombie children = %v, want [%d]", z, cmd.Process.Pid)
	}
	pass(map[int]time.Time{}, 0, time.Now(), slog.Default())
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("Wait = %v, want exit status 7 (the reaper stole it?)", err)
	}
}

func TestPassRegistryAndOrphans(t *testing.T) {
	// syscall.ForkExec keeps no pidfd: only the registry protects the child.
	start := func() int {
		pid, err := syscall.ForkExec("/bin/sh", []string{"sh", "-c", "exit 3"}, &syscall.ProcAttr{Files: []uintptr{0, 1, 2}})
		if err != nil {
			t.Fatal(err)
		}
		return pid
	}
	registered, unregistered := start(), start()
	ownedMu.Lock()
	owned[registered]++
	ownedMu.Unlock()
	defer func() {
		ownedMu.Lock()
		delete(owned, registered)
		ownedMu.Unlock()
	}()
	waitZombies(t, 2)

	seen := map[int]time.Time{}
	now := time.Now()
	if !pass(seen, time.Second, now, slog.Default()) {
		t.Error("pass within grace reported nothing pending")
	}
	if z := zombies(t); len(z) != 2 {
		t.Fatalf("a zombie was reaped within its grace: %v", z)
	}
	if pass(seen, time.Second, now.Add(2*time.Second), slog.Default()) {
		t.Error("pass after grace still reports pending")
	}
	z := zombies(t)
	if len(z) != 1 || z[0] != registered {
		t.Fatalf("zombies after pass = %v, want only the registered %d", z, registered)
	}
	var ws unix.WaitStatus
	if got, err := unix.Wait4(registered, &ws, 0, nil); err != nil || got != registered || ExitCode(ws) != 3 {
		t.Fatalf("wait4(registered) = %d, %v, status %d; want its exit status 3", got, err, ExitCode(ws))
	}
	if _, err := unix.Wait4(unregistered, &ws, unix.WNOHANG, nil); !errors.Is(err, unix.ECHILD) {
		t.Errorf("unregistered zombie not reaped: wait4 err = %v", err)
	}
}

func TestRunReapsOrphansWhileHooksRun(t *testing.T) {
	if err := SetSubreaper(); err != nil {
		t.Skipf("cannot become a child subreaper: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, Options{Grace: 0, Subreaper: true}) }()

	// Hooks: plain exec.Cmd, many at once, each must get its own status.
	// Orphans: each script also leaves a background grandchild behind.
	const workers, runs = 4, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers*runs)
	for w := range workers {
		wg.Go(func() {
			for i := range runs {
				code := (w*runs + i) % 5
				cmd := exec.Command("sh", "-c", fmt.Sprintf("(sleep 0.0%d &) ; exit %d", i%10, code))
				err := cmd.Run()
				got := 0
				var ee *exec.ExitError
				switch {
				case errors.As(err, &ee):
					got = ee.ExitCode()
				case err != nil:
					errs <- fmt.Errorf("run %d/%d: %w", w, i, err)
					continue
				}
				if got != code {
					errs <- fmt.Errorf("run %d/%d: exit %d, want %d", w, i, got, code)
				}
			}
		})
	}
	// The same through Start/Wait.
	wg.Go(func() {
		for i := range runs {
			cmd := exec.Command("sh", "-c", fmt.Sprintf("exit %d", i%3))
			if err := Start(cmd); err != nil {
				errs <- err
				continue
			}
			err := Wait(cmd)
			if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != i%3 {
				errs <- fmt.Errorf("Start/Wait %d: %w", i, err)
			}
		}
	})
	wg.Wait()
	close(errs)
	var failures []string
	for err := range errs {
		failures = append(failures, err.Error())
	}
	if len(failures) > 0 {
		t.Errorf("%d of %d hook runs lost their status:\n%s", len(failures), workers*runs+runs, strings.Join(failures, "\n"))
	}
	// Every orphan (the sleeps) ends up reaped: no zombie children remain.
	waitZombies(t, 0) // every orphan reaped
	cancel()
	if err := await.Recv(t, done, "Run to return after cancel"); !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
	// Orphans may still be running (sleep 0.09); they are not zombies.
	_ = os.Getpid()
}
