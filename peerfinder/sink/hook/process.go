package hook

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/flockd/flock/internal/reap"
)

// outputDrain is how long the output pipes stay open after the hook exited,
// for a background process of the hook that still holds them.
const outputDrain = 500 * time.Millisecond

// maxLine is the longest output line logged as one record; longer lines are
// logged in pieces of this size.
const maxLine = 16 << 10

// The output of one run that is logged: at most MaxOutputLines records and
// MaxOutputBytes bytes (newlines included), both streams together. The rest
// is read and dropped, and counted in one "hook output dropped" record.
const (
	MaxOutputLines = 1000
	MaxOutputBytes = 256 << 10
)

// run starts argv in a new process group with env and stdin, logs its
// output, and waits for it. It always waits for a started process.
func (h *Hook) run(ctx context.Context, name string, argv, env []string, stdin []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("hook %s %s: not started: %w", name, argv[0], context.Cause(ctx))
	}
	p, err := newPipes()
	if err != nil {
		return fmt.Errorf("hook %s %s: %w", name, argv[0], err)
	}
	defer p.closeAll()

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = p.inR, p.outW, p.errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	p.closeChildEnds()
	if err != nil {
		return fmt.Errorf("hook %s: start %s: %w", name, argv[0], err)
	}
	pgid := cmd.Process.Pid // Setpgid with Pgid 0: the group is led by the hook.

	var wg, readers sync.WaitGroup
	wg.Go(func() {
		// EPIPE (the hook exited without reading everything) and ErrClosed
		// (we stopped waiting for a reader that never came) are expected.
		_, _ = p.inW.Write(stdin)
		p.close(p.inW)
	})
	budget := &outputBudget{lines: MaxOutputLines, bytes: MaxOutputBytes}
	readers.Go(func() { h.logLines(ctx, p.outR, name, "stdout", budget) })
	readers.Go(func() { h.logLines(ctx, p.errR, name, "stderr", budget) })

	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if h.cfg.Timeout > 0 {
		runCtx, cancel = context.WithTimeoutCause(ctx, h.cfg.Timeout, ErrTimeout)
	}
	defer cancel()
	exited := make(chan struct{})
	var killCause error // written by the killer before wg.Done, read after wg.Wait
	wg.Go(func() {
		select {
		case <-exited:
			return
		case <-runCtx.Done():
		}
		killCause = context.Cause(runCtx)
		reap.KillGroup(pgid, exited, h.cfg.KillGrace)
	})

	waitErr := cmd.Wait()
	close(exited)
	var exitErr *exec.ExitError
	if errors.As(waitErr, &exitErr) && runCtx.Err() == nil {
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			// Killed from outside (OOM killer, an operator): the run
			// failed and is retried, so what is left of its process
			// group is half-done work that would race the retry.
			reap.KillGroup(pgid, exited, h.cfg.KillGrace)
		}
	}
	drained := make(chan struct{})
	go func() { readers.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(outputDrain):
		p.close(p.outR)
		p.close(p.errR)
		<-drained
	}
	p.close(p.inW)
	wg.Wait()
	if budget.droppedLines > 0 {
		h.log.Warn("hook output dropped", "hook", name, "dropped_lines", budget.droppedLines, "dropped_bytes", budget.droppedBytes,
			"limit_lines", MaxOutputLines, "limit_bytes", MaxOutputBytes)
	}

	switch {
	case errors.Is(killCause, ErrTimeout):
		return fmt.Errorf("hook %s %s: %w after %s, process group killed", name, argv[0], ErrTimeout, h.cfg.Timeout)
	case killCause != nil:
		return fmt.Errorf("hook %s %s: process group killed: %w", name, argv[0], killCause)
	case waitErr != nil:
		return fmt.Errorf("hook %s %s: %w", name, argv[0], waitErr)
	}
	return nil
}

// outputBudget is what is left of a run's logged output; both streams'
// readers share it.
type outputBudget struct {
	mu                         sync.Mutex
	lines, bytes               int // left
	droppedLines, droppedBytes int // read after the budget was spent; read after the readers ended
}

// take reports whether a piece of n bytes is logged, and counts it as
// dropped otherwise. Once one piece is dropped, all later ones are, so
// the log holds a prefix of the output.
func (b *outputBudget) take(n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.droppedLines == 0 && b.lines > 0 && b.bytes >= n {
		b.lines--
		b.bytes -= n
		return true
	}
	b.droppedLines++
	b.droppedBytes += n
	return false
}

// logLines logs each line read from r until EOF or a read error, while
// budget lasts, and reads and drops the rest.
func (h *Hook) logLines(ctx context.Context, r *os.File, name, stream string, budget *outputBudget) {
	br := bufio.NewReaderSize(r, maxLine)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 && budget.take(len(line)) {
			line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
			h.log.InfoContext(ctx, "hook output", "hook", name, "stream", stream, "line", string(line))
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

// pipes holds the three pipes of a hook. The child ends are closed in the
// parent right after start; every end is closed at most once.
type pipes struct {
	inR, inW, outR, outW, errR, errW *os.File
	mu                               sync.Mutex
	closed                           map[*os.File]bool
}

func newPipes() (*pipes, error) {
	p := &pipes{closed: make(map[*os.File]bool)}
	var err error
	if p.inR, p.inW, err = os.Pipe(); err != nil {
		return nil, fmt.Errorf("stdin pipe: %w", err)
	}
	if p.outR, p.outW, err = os.Pipe(); err != nil {
		p.closeAll()
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	if p.errR, p.errW, err = os.Pipe(); err != nil {
		p.closeAll()
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}
	return p, nil
}

func (p *pipes) close(f *os.File) {
	if f == nil {
		return
	}
	p.mu.Lock()
	done := p.closed[f]
	p.closed[f] = true
	p.mu.Unlock()
	if !done {
		_ = f.Close()
	}
}

func (p *pipes) closeChildEnds() {
	p.close(p.inR)
	p.close(p.outW)
	p.close(p.errW)
}

func (p *pipes) closeAll() {
	for _, f := range []*os.File{p.inR, p.inW, p.outR, p.outW, p.errR, p.errW} {
		p.close(f)
	}
}
