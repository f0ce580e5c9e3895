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
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/flockd/flock/internal/reap"
	"github.com/flockd/flock/internal/version"
	"github.com/flockd/flock/peerfinder/config"
	"github.com/flockd/flock/peerfinder/engine"
	"github.com/flockd/flock/peerfinder/membership"
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
func Main(ctx context.Context, args []string, env config.Env, stdout, stderr io.Writer) int {
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
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	kc := newKubeClient(cfg, log) // one client for every part that talks to the API
	if ev := startEvents(ctx, cfg, kc, log); ev != nil {
		log = slog.New(ev.Handler(log.Handler()))
		defer ev.Stop() // after the last record, "giving up" included
	}
	if err := run(ctx, cfg, kc, log, stdout); err != nil {
		var ue *config.UsageError
		switch {
		case errors.As(err, &ue):
			fmt.Fprintf(stderr, "peer-finder: %v\n", err)
			return ExitUsage
		case errors.Is(err, engine.ErrBootstrapTimeout):
			log.Error("giving up", "err", err)
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
	return ExitOK
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

func build(cfg *config.Config, kc *kubeClient, log *slog.Logger) (*pipeline, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), version.NewCollector())

	sources, err := buildSources(cfg, log, reg, kc)
	if err != nil {
		return nil, err
	}
	sinks, missing, err := buildSinks(cfg, log, reg, kc)
	if err != nil {
		return nil, err
	}
	boot, err := buildBootstrap(cfg, log, reg, kc)
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
	})
	return &pipeline{engine: eng, registry: reg, sources: sources, opts: opts, boot: boot, sinks: sinks, kube: kc}, nil
}

func run(ctx context.Context, cfg *config.Config, kc *kubeClient, log *slog.Logger, stdout io.Writer) error {
	p, err := build(cfg, kc, log)
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
