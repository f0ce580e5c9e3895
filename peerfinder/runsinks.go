package peerfinder

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/flockd/flock/peerfinder/engine"
	execsink "github.com/flockd/flock/peerfinder/sink/exec"
	"github.com/flockd/flock/peerfinder/sink/hostsfile"
	"github.com/flockd/flock/peerfinder/sink/leader"
)

// keepInterval is how often a hosts file is checked for a block that
// someone else (the kubelet, at each container start) wrote away.
const keepInterval = time.Second

// ChildExit is returned by runPipeline when the command after "--" exited;
// peer-finder exits with Status (128+N when signal N killed it).
type ChildExit struct{ Status int }

func (e *ChildExit) Error() string { return fmt.Sprintf("command exited with status %d", e.Status) }

// runPipeline runs the engine together with what its sinks need besides
// Apply: the Lease campaigns of leader-wrapped sinks and, in exec mode, the
// supervised command.
//
// Without a command it returns the engine's result once ctx is done (or, in
// init mode, after the first delivery). With one, a signal that cancels ctx
// before the command started stops peer-finder as usual; once it runs, the
// exec sink forwards the signals and peer-finder lives as long as the
// command: it returns a *ChildExit with the command's status (the command is
// SIGKILLed when it has not exited -kill-timeout after that signal). If the engine
// fails (bootstrap timeout), the command, when running, is stopped.
func runPipeline(ctx context.Context, eng *engine.Engine, sinks []engine.NamedSink, log *slog.Logger) error {
	var ex *execsink.Sink
	var leaders []*leader.Sink
	var hosts []*hostsfile.Sink
	for _, s := range sinks {
		switch v := s.Sink.(type) {
		case *execsink.Sink:
			ex = v
		case *leader.Sink:
			leaders = append(leaders, v)
		case *hostsfile.Sink: // a Lease-held (shared) file is the holder's alone: not kept
			hosts = append(hosts, v)
		}
	}
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	defer func() { stopBG(); wg.Wait() }()
	for _, h := range hosts {
		wg.Go(func() { h.Keep(bg, keepInterval) })
	}
	for _, l := range leaders {
		wg.Go(func() {
			if err := l.Run(bg); err != nil {
				log.Error("lease campaign failed", "err", err)
			}
		})
	}
	if ex == nil {
		return eng.Run(ctx)
	}

	engCtx, stopEng := context.WithCancel(bg)
	defer stopEng()
	engDone := make(chan error, 1)
	wg.Go(func() { engDone <- eng.Run(engCtx) })
	for {
		select {
		case <-ctx.Done():
			select {
			case <-ex.Started():
				// Forwarded to the command by the exec sink; wait for it,
				// and kill it after -kill-timeout.
				ex.Stopping()
				ctx = context.Background()
				continue
			default:
			}
			stopEng()
			<-engDone
			return nil
		case <-ex.Done():
			stopEng()
			<-engDone
			ex.Close()
			return &ChildExit{Status: ex.ExitCode()}
		case err := <-engDone:
			if status := ex.Stop(context.WithoutCancel(ctx)); status >= 0 {
				log.Info("command stopped", "status", status)
			}
			if err == nil {
				err = errors.New("delivery stopped while the command was running")
			}
			return err
		}
	}
}
