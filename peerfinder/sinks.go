package peerfinder

import (
	"cmp"
	"fmt"
	"log/slog"
	"os"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flockd/flock/peerfinder/config"
	"github.com/flockd/flock/peerfinder/engine"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
	execsink "github.com/flockd/flock/peerfinder/sink/exec"
	"github.com/flockd/flock/peerfinder/sink/hook"
	"github.com/flockd/flock/peerfinder/sink/hostsfile"
	"github.com/flockd/flock/peerfinder/sink/jobfile"
	"github.com/flockd/flock/peerfinder/sink/jsonfile"
	"github.com/flockd/flock/peerfinder/sink/leader"
)

// buildSinks creates the sinks in delivery order: files first, then hooks,
// then the exec'd main process, so each sees what the ones before it wrote.
// With -wait-for-all it also returns the expected-names gate for
// membership (the hosts file's names without an address).
func buildSinks(cfg *config.Config, log *slog.Logger, reg prometheus.Registerer, kc *kubeClient) ([]engine.NamedSink, func(peer.Set) []string, error) {
	var sinks []engine.NamedSink
	var missing func(peer.Set) []string
	s := cfg.Sinks
	if s.HostsFile != "" {
		hf, err := hostsfile.New(hostsfile.Options{
			Path: s.HostsFile, ID: s.HostsID, NameTemplate: s.NameTemplate, AliasTemplates: s.AliasTemplates,
			IndexLabel: s.IndexLabel, Family: s.IPFamily, Expected: s.Expected, WriteMode: s.WriteMode,
			WaitForAll: s.WaitForAll, Logger: log, Metrics: hostsfile.NewMetrics(reg),
			// Named in the block, so that another writer of it can say who.
			Writer: fmt.Sprintf("%s pid %d", cmp.Or(cfg.Bootstrap.PodName, cfg.Hostname), os.Getpid()),
		})
		if err != nil {
			return nil, nil, &config.UsageError{Flag: "hosts-file", Err: err}
		}
		if s.WaitForAll {
			missing = hf.Missing
		}
		var sk engine.NamedSink = engine.NamedSink{Name: "hosts-file", Sink: hf}
		if s.HostsLease != "" {
			client, err := kc.Get()
			if err != nil {
				return nil, nil, err
			}
			ls, err := leader.New(leader.Config{
				// Follow: with -wait-for-all, a non-writer waits for the
				// writer's file to be complete, not just for the addresses.
				Inner: hf, Follow: hf.Follower(), Client: client, Namespace: cfg.Namespace, Name: s.HostsLease,
				// Unique per process: a pod re-created under the same name
				// (a StatefulSet member) while its predecessor still
				// terminates must not share the predecessor's identity, or
				// both would believe they hold the Lease.
				Identity: cfg.Bootstrap.PodName + "_" + uuid.NewString(), Logger: log.With("sink", "hosts-file"),
			})
			if err != nil {
				return nil, nil, &config.UsageError{Flag: "hosts-lease", Err: err}
			}
			sk.Sink = ls
		}
		sinks = append(sinks, sk)
	}
	if s.JSONFile != "" {
		jf, err := jsonfile.New(jsonfile.Options{Path: s.JSONFile, Logger: log})
		if err != nil {
			return nil, nil, &config.UsageError{Flag: "json-file", Err: err}
		}
		sinks = append(sinks, engine.NamedSink{Name: "json-file", Sink: jf})
	}
	jobSinks, rdv, err := buildJobFiles(cfg, log)
	if err != nil {
		return nil, nil, err
	}
	sinks = append(sinks, jobSinks...)
	// A hook or command that can never run is a usage error now, not a
	// retry forever.
	for _, c := range []struct {
		flag string
		argv []string
	}{{"on-start", cfg.OnStart}, {"on-change", cfg.OnChange}, {"--", s.Exec}} {
		if c.argv == nil {
			continue
		}
		if err := hook.Runnable(c.argv); err != nil {
			return nil, nil, &config.UsageError{Flag: c.flag, Err: fmt.Errorf("cannot run: %w", err)}
		}
	}
	if cfg.OnStart != nil || cfg.OnChange != nil {
		hk, err := hook.New(hook.Config{
			OnStart:         cfg.OnStart,
			OnChange:        cfg.OnChange,
			Timeout:         cfg.HookTimeout,
			Format:          cfg.Format,
			TrailingNewline: cfg.TrailingNewline,
			Logger:          log,
		})
		if err != nil {
			return nil, nil, &config.UsageError{Flag: "on-start", Err: err}
		}
		sinks = append(sinks, engine.NamedSink{Name: "hook", Sink: hk})
	}
	if s.Exec != nil {
		ex, err := execsink.New(execsink.Config{
			Argv: s.Exec, ReloadSignal: s.ReloadSignal, KillTimeout: s.KillTimeout, Reap: true, Logger: log,
			EnvFrom: rdv,
		})
		if err != nil {
			return nil, nil, &config.UsageError{Flag: "--", Err: err}
		}
		sinks = append(sinks, engine.NamedSink{Name: "exec", Sink: ex})
	}
	return sinks, missing, nil
}

// buildJobFiles creates the MPI hostfile and rendezvous file sinks, and
// returns the rendezvous variables' function for the -- command's
// environment (nil without -rendezvous). Both rank the names the hosts file
// gives.
func buildJobFiles(cfg *config.Config, log *slog.Logger) ([]engine.NamedSink, func(sink.Delivery) ([]string, error), error) {
	s := cfg.Sinks
	if s.MPIHostfile == "" && s.Rendezvous == "" {
		return nil, nil, nil
	}
	namer, err := hostsfile.NewNamer(s.NameTemplate, nil, s.IndexLabel)
	if err != nil {
		return nil, nil, &config.UsageError{Flag: "hosts-name-template", Err: err}
	}
	ranker := jobfile.Ranker{Namer: namer, Family: s.IPFamily, Expected: s.Expected}
	var sinks []engine.NamedSink
	if s.MPIHostfile != "" {
		r := ranker
		r.Roles = s.MPIRoles
		mpi := &jobfile.MPI{Ranker: r, Slots: s.MPISlots}
		f, err := jobfile.NewFile("mpi-hostfile", s.MPIHostfile, mpi.Render, jobfile.IsHostfile, log)
		if err != nil {
			return nil, nil, &config.UsageError{Flag: "mpi-hostfile", Err: err}
		}
		sinks = append(sinks, engine.NamedSink{Name: "mpi-hostfile", Sink: f})
	}
	if s.Rendezvous == "" {
		return sinks, nil, nil
	}
	ranker.Roles = s.RendezvousRoles
	rdv := jobfile.Rendezvous{Ranker: ranker, Framework: s.Rendezvous, Port: s.RendezvousPort}
	if s.RendezvousFile != "" {
		f, err := jobfile.NewFile("rendezvous-file", s.RendezvousFile, rdv.Render, jobfile.IsEnvFile, log)
		if err != nil {
			return nil, nil, &config.UsageError{Flag: "rendezvous-file", Err: err}
		}
		sinks = append(sinks, engine.NamedSink{Name: "rendezvous-file", Sink: f})
	}
	return sinks, rdv.Environ, nil
}
