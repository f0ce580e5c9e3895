// Package peerfinder wires peer-finder together: it turns a parsed command
// line into sources, sinks and an engine, runs them, and maps the outcome to
// an exit status. cmd/peer-finder only calls Main.
package peerfinder

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/flockd/flock/internal/reap"
	"github.com/flockd/flock/internal/version"
	"github.com/flockd/flock/peerfinder/config"
	"github.com/flockd/flock/peerfinder/engine"
	"github.com/flockd/flock/peerfinder/events"
	"github.com/flockd/flock/peerfinder/membership"
	"github.com/flockd/flock/peerfinder/status"
)

// Exit statuses of peer-finder.
const (
	ExitOK               = 0
	ExitError            = 1 // runtime failure, or -diagnose found delivery held back
	ExitUsage            = 2 // bad command line
	ExitBootstrapTimeout = 3 // init mode gave up after -bootstrap-timeout
	ExitNotDelivered     = 4 // init or -- mode stopped (SIGTERM/SIGINT) before it delivered
)

// errNotDelivered ends an init or -- run that was stopped before its
// delivery: it must not look like a success (`peer-finder -on-start=... &&
// app`, a pid-1 Job pod evicted while it waited for its peers).
var errNotDelivered = errors.New("stopped before the peer set was delivered")

// OSEnv is the real machine environment for config.Parse.
func OSEnv() config.Env {
	return config.Env{
		Getenv:     os.Getenv,
		Hostname:   os.Hostname,
		ResolvConf: func() ([]byte, error) { return os.ReadFile("/etc/resolv.conf") },
		ServiceAccountNamespace: func() ([]byte, error) {
			return os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
		},
	}
}

// Main runs peer-finder with args (without the program name) and returns the
// exit status.
//
// "status" as the first argument runs `peer-finder status` (package
// status): peer-finder itself takes no argument before --, so no command
// line that ran peer-finder means something else now.
func Main(ctx context.Context, args []string, env config.Env, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "status" {
		return status.Main(ctx, args[1:], env.Getenv, stdout, stderr)
	}
	cfg, err := config.Parse(args, env)
	if errors.Is(err, flag.ErrHelp) {
		config.PrintUsage(stdout)
		return ExitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "peer-finder: %v\nRun 'peer-finder -help' for usage.\n", err)
		return ExitUsage
	}
	if cfg.ShowVersion {
		version.Print(stdout, "peer-finder")
		return ExitOK
	}
	log := newLogger(cfg, stderr)
	ctx, sigs, stop := stopOnSignals(ctx)
	defer stop()
	kc := newKubeClient(cfg, log) // one client for every part that talks to the API
	em, stopEvents := startEvents(ctx, cfg, kc, log)
	defer stopEvents() // after the last Event, the bootstrap timeout's included
	return exitStatus(run(ctx, cfg, kc, log, em, stdout, sigs), log, em, stderr)
}

// exitStatus maps the outcome of run to peer-finder's exit status, logging
// why it failed and emitting the BootstrapTimeout Event.
func exitStatus(err error, log *slog.Logger, em events.Emitter, stderr io.Writer) int {
	if err == nil {
		return ExitOK
	}
	var ue *config.UsageError
	switch {
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "peer-finder: %v\n", err)
		return ExitUsage
	case errors.Is(err, engine.ErrBootstrapTimeout):
		log.Error("giving up", "err", err)
		em.Emit(events.BootstrapTimeout(err))
		return ExitBootstrapTimeout
	case errors.Is(err, errHeldBack):
		return ExitError
	case errors.Is(err, errNotDelivered):
		log.Error("stopped", "err", err)
		return ExitNotDelivered
	}
	var ex interface{ ExitStatus() int } // see sink.Runner
	if errors.As(err, &ex) {
		return ex.ExitStatus() // the command after --, as its status
	}
	log.Error("peer-finder failed", "err", err)
	return ExitError
}

// stopSignals end a run: TERM and INT always (in -- mode they are also
// forwarded to the command), HUP and QUIT unless a -- command is running,
// which then gets them instead (see forwarding). A sidecar or init container
// has nothing to reload, and the Go runtime's default for these two (exit
// 129 or a goroutine dump and exit 2) left a running hook's process group
// behind; stopped through ctx instead, the hook's group gets SIGTERM and
// the exit status is SIGTERM's.
var stopSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT}

// forwarding is implemented by a sink that sends some signals to a process
// it runs (the exec sink, while its command runs); such a signal does not
// stop peer-finder.
type forwarding interface {
	Forwards(os.Signal) bool
}

// signalStop holds the running pipeline's forwarding sink, once built.
type signalStop struct{ forwarder atomic.Pointer[forwarding] }

// errSignal is the cause of a run stopped by a signal.
var errSignal = errors.New("signal received")

// stopOnSignals returns a context cancelled, with a cause naming the
// signal, by the first of stopSignals that no sink forwards. SIGPIPE is
// handled too and does nothing: peer-finder survives a closed stderr pipe
// (a Go program dies of SIGPIPE on a write to fd 1 or 2 unless it handles
// it); being handled rather than ignored, it is still default in hooks and
// in the -- command.
func stopOnSignals(parent context.Context) (context.Context, *signalStop, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	stop := &signalStop{}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, stopSignals...)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case sig := <-sigs:
				reload := sig == syscall.SIGHUP || sig == syscall.SIGQUIT
				if f := stop.forwarder.Load(); reload && f != nil && (*f).Forwards(sig) {
					continue
				}
				cancel(fmt.Errorf("%w: %v", errSignal, sig))
			}
		}
	}()
	return ctx, stop, func() {
		signal.Stop(sigs)
		close(done)
		cancel(context.Canceled)
	}
}

func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	if cfg.Verbosity > 0 {
		opts.Level = slog.LevelDebug
	}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// pipeline is everything built from a Config.
type pipeline struct {
	engine   *engine.Engine
	registry *prometheus.Registry
	sources  []engine.NamedSource
	sinks    []engine.NamedSink
	opts     membership.Options
	boot     *bootstrapParts
	kube     *kubeClient // shared by every part that talks to the API
}

// build builds the pipeline; em is told of the Events its parts decide
// (nil: none).
func build(cfg *config.Config, kc *kubeClient, log *slog.Logger, em events.Emitter) (*pipeline, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), version.NewCollector())

	sources, err := buildSources(cfg, log, reg, kc, em)
	if err != nil {
		return nil, err
	}
	sinks, missing, err := buildSinks(cfg, log, reg, kc)
	if err != nil {
		return nil, err
	}
	boot, err := buildBootstrap(cfg, log, reg, kc, em)
	if err != nil {
		return nil, err
	}
	opts := membership.Options{Self: cfg.Self(), MinPeers: cfg.MinPeers, Expect: cfg.Bootstrap.Expect, StableFor: cfg.StableFor, Missing: missing}
	eng := engine.New(engine.Config{
		Sources:          sources,
		Sinks:            sinks,
		Membership:       opts,
		Expect:           boot.sizeSource(),
		Role:             boot.role,
		BootstrapTimeout: cfg.Bootstrap.Timeout,
		Once:             cfg.InitMode(),
		Logger:           log,
		Metrics:          engine.NewMetrics(reg),
		Events:           em,
	})
	return &pipeline{engine: eng, registry: reg, sources: sources, opts: opts, boot: boot, sinks: sinks, kube: kc}, nil
}

func run(ctx context.Context, cfg *config.Config, kc *kubeClient, log *slog.Logger, em events.Emitter, stdout io.Writer, sigs *signalStop) error {
	if cfg.Sinks.ExpectAuto && !cfg.Diagnose { // diagnose checks the permissions instead
		if err := expectFromJobs(ctx, cfg, kc, log); err != nil {
			return err
		}
	}
	p, err := build(cfg, kc, log, em)
	if err != nil {
		return err
	}
	if cfg.Diagnose {
		return diagnose(ctx, cfg, p, stdout)
	}
	log.Info("starting", "self", cfg.Self(), "service", cfg.ServiceFQDN(), "domain_from", cfg.DomainSource,
		"dns_servers", cfg.DNSServers, "init_mode", cfg.InitMode())
	if cfg.MetricsAddr != "" {
		srv, err := serve(cfg.MetricsAddr, p, log)
		if err != nil {
			return err
		}
		defer func() {
			shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = srv.Shutdown(shutdownCtx)
		}()
	}
	if reap.Needed() && cfg.Sinks.Exec == nil {
		// pid 1 of the container (or a subreaper): hooks' orphans come to
		// us. The exec sink runs its own reaper.
		reapCtx, stopReap := context.WithCancel(context.WithoutCancel(ctx))
		reaped := make(chan struct{})
		go func() {
			defer close(reaped)
			_ = reap.Run(reapCtx, reap.Options{Grace: reap.DefaultGrace, Logger: log})
		}()
		defer func() { stopReap(); <-reaped }()
	}
	for _, s := range p.sinks {
		if f, ok := s.Sink.(forwarding); ok {
			sigs.forwarder.Store(&f)
			defer sigs.forwarder.Store(nil)
		}
	}
	if err := runPipeline(ctx, p.engine, p.sinks); err != nil {
		return err
	}
	if ctx.Err() != nil {
		log.Info("stopping", "cause", context.Cause(ctx))
		if deliveryIsTheOutcome(cfg) && !p.engine.Status().Delivered {
			return errNotDelivered
		}
	}
	return nil
}

// deliveryIsTheOutcome reports whether a run exists to deliver, so that
// being stopped before the first delivery is a failure: init mode, and --
// mode, whose command starts only then. A sidecar's stop is its normal end.
func deliveryIsTheOutcome(cfg *config.Config) bool {
	return cfg.InitMode() || cfg.Sinks.Exec != nil
}
