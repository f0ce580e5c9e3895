package config

import (
	"cmp"
	"flag"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/flockd/flock/internal/atomicfile"
	execsink "github.com/flockd/flock/peerfinder/sink/exec"
	"github.com/flockd/flock/peerfinder/sink/hostsfile"
	"github.com/flockd/flock/peerfinder/sink/jobfile"
)

// Sinks holds the flags of the file and exec sinks.
type Sinks struct {
	// HostsFile is -hosts-file; empty disables the hosts-file sink.
	HostsFile string
	// HostsID names the managed block (-hosts-id; default the service).
	HostsID string
	// NameTemplate and AliasTemplates make each peer's host names.
	NameTemplate   string
	AliasTemplates []string
	// IndexLabel is read first for the template's .Index.
	IndexLabel string
	// ExpectSpec is -hosts-expect ("ps=1,worker=3" or names); Expected is
	// its expansion, or, with -expect N and no spec, <prefix>-0..N-1 from
	// this member's host name.
	ExpectSpec string
	Expected   []string
	// ExpectAuto is -hosts-expect=auto: Expected is read at start from the
	// Indexed Jobs of this pod's job (package jobs), joined by JobLabel
	// (-hosts-job-label) when set.
	ExpectAuto bool
	JobLabel   string
	// IPFamily selects the addresses written.
	IPFamily hostsfile.Family
	// WriteMode is -hosts-write-mode: auto, replace or in-place.
	WriteMode atomicfile.Mode
	// HostsLease names the Lease whose holder alone writes the hosts file.
	HostsLease string
	// WaitForAll holds the first delivery until every expected name has an
	// address.
	WaitForAll bool

	// JSONFile is -json-file; empty disables the JSON file sink.
	JSONFile string

	// MPIHostfile is -mpi-hostfile; empty disables the MPI hostfile sink.
	MPIHostfile string
	// MPISlots is -mpi-slots (default 1).
	MPISlots jobfile.Slots
	// MPIRoles is -mpi-roles: the roles listed in the hostfile, in rank
	// order; all when empty.
	MPIRoles []string
	// Rendezvous is -rendezvous: torch, tf, or "" for none.
	Rendezvous jobfile.Framework
	// RendezvousPort is -rendezvous-port; the framework's default when 0.
	RendezvousPort int
	// RendezvousFile is -rendezvous-file; empty writes no file.
	RendezvousFile string
	// RendezvousRoles is -rendezvous-roles: the roles ranked, in rank
	// order; all when empty.
	RendezvousRoles []string

	// mpiSlotsSet says -mpi-slots was given.
	mpiSlotsSet bool

	// Exec is the command after "--" (pid-1 mode); nil disables it.
	Exec []string
	// ReloadSignal is sent to Exec after each later change.
	ReloadSignal syscall.Signal
	// KillTimeout bounds the wait for Exec after SIGTERM on shutdown.
	KillTimeout time.Duration

	// Once exits after the first delivery (init-container mode) without
	// -on-start.
	Once bool
}

// Any reports whether a file or exec sink is configured.
func (s Sinks) Any() bool {
	return s.HostsFile != "" || s.JSONFile != "" || s.MPIHostfile != "" || s.RendezvousFile != "" || s.Exec != nil
}

// addSinkFlags registers the sink flags on fs.
func (c *Config) addSinkFlags(fs *flag.FlagSet) {
	s := &c.Sinks
	fs.StringVar(&s.HostsFile, "hosts-file", "", "Keep the peers in a managed block of this hosts `file` (e.g. /etc/hosts or a shared volume); lines outside the block are kept byte for byte.")
	fs.StringVar(&s.HostsID, "hosts-id", "", "Name of the managed block in the hosts file, so several peer-finders can share one file; default the -service name (peer-finder without one).")
	fs.StringVar(&s.NameTemplate, "hosts-name-template", hostsfile.DefaultNameTemplate, "Go `template` (fields, index, printf, if; see README) for each peer's host name, over .Name .FQDN .Pod .Role .Index .Ordinal .Node .Zone .Labels; e.g. {{.Role}}-{{.Index}} or {{index .Labels \"role\"}}-{{.Index}}. Invalid (non RFC 1123) names are logged and skipped.")
	fs.Func("hosts-alias-template", "Go `template` for a further name on each peer's line, e.g. {{.FQDN}}; repeatable.", func(v string) error {
		s.AliasTemplates = append(s.AliasTemplates, v)
		return nil
	})
	fs.StringVar(&s.IndexLabel, "hosts-index-label", "", "Pod `label` read first for .Index; default apps.kubernetes.io/pod-index, then batch.kubernetes.io/job-completion-index, then the ordinal.")
	fs.StringVar(&s.ExpectSpec, "hosts-expect", "", "Expected host names: role=replicas items and/or names, comma-separated, e.g. ps=1,worker=3 (ps-0 worker-0 worker-1 worker-2); listed as comments until their address is known. auto (with -source=pods): every name the pods of this pod's Indexed Jobs will have, read from the Jobs at start (see -hosts-job-label; RBAC: get pods, list jobs.batch). Default with -expect N: <prefix>-0..N-1 from this host name.")
	fs.StringVar(&s.JobLabel, "hosts-job-label", "", "With -hosts-expect=auto: pod template `label` key joining several Indexed Jobs into one job (each Job one role), e.g. flockd.io/job: every Job of the namespace whose template has this pod's value. Default: this pod's Job alone, or a JobSet's Jobs (jobset.sigs.k8s.io/jobset-name).")
	fs.Func("ip-family", "Addresses written to the hosts file: ipv4, ipv6 or all (default all).", func(v string) error {
		f, err := hostsfile.ParseFamily(v)
		s.IPFamily = f
		return err
	})
	fs.Func("hosts-write-mode", "How the hosts file is written: auto (atomic rename, in place for a bind-mounted file such as /etc/hosts), replace or in-place (default auto).", func(v string) error {
		m, err := atomicfile.ParseMode(v)
		s.WriteMode = m
		return err
	})
	fs.StringVar(&s.HostsLease, "hosts-lease", "", "Only the holder of this coordination.k8s.io Lease `name` writes the hosts file (one writer for a file shared by many pods). Needs get,create,update on leases.")
	fs.BoolVar(&s.WaitForAll, "wait-for-all", false, "Hold the first delivery (and so init mode's exit, hooks and the -- command) until every expected host name has an address; bounded by -bootstrap-timeout.")
	fs.StringVar(&s.JSONFile, "json-file", "", "Write the peer set as a versioned JSON document to this `file`, atomically, only when it changed.")
	s.MPISlots = jobfile.Slots{N: 1}
	fs.StringVar(&s.MPIHostfile, "mpi-hostfile", "", "Write an MPI hostfile to this `file`, atomically: one \"<name> slots=N\" line per member with the hosts file's names (-hosts-name-template, -hosts-expect), ordered by role then index (mpirun's rank order).")
	fs.Func("mpi-slots", "Slots of each -mpi-hostfile line: a whole `number`, or auto (the pod's CPU request in whole CPUs, at least 1; needs -source=pods) (default 1).", func(v string) error {
		sl, err := jobfile.ParseSlots(v)
		s.MPISlots, s.mpiSlotsSet = sl, true
		return err
	})
	fs.Func("mpi-roles", "Comma-separated `roles` listed in -mpi-hostfile, in rank order, e.g. worker (a launcher that is no slot left out); default every role, by name.", rolesFlag(&s.MPIRoles))
	fs.Func("rendezvous", "Rendezvous variables of a training `framework`: torch (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK) or tf (TF_CONFIG), written to -rendezvous-file and set in the -- command's environment when it starts. Needs expected names (-hosts-expect or -expect N).", func(v string) error {
		f, err := jobfile.ParseFramework(v)
		s.Rendezvous = f
		return err
	})
	fs.IntVar(&s.RendezvousPort, "rendezvous-port", 0, "The `port` in MASTER_PORT or in TF_CONFIG's addresses (default 29500 for torch, 2222 for tf).")
	fs.StringVar(&s.RendezvousFile, "rendezvous-file", "", "Write the -rendezvous variables to this `file` as shell-sourceable NAME='value' lines, atomically, at every change of the set.")
	fs.Func("rendezvous-roles", "Comma-separated `roles` ranked by -rendezvous, in rank order (the first role's first member is torch's MASTER_ADDR, rank 0); default every role, by name.", rolesFlag(&s.RendezvousRoles))
	fs.Func("reload-signal", "Signal sent to the -- command after each later change of the peer set, e.g. SIGHUP; default none. One the command can catch: not KILL, STOP, TSTP, TTIN, TTOU, 32 or 33.", func(v string) error {
		sig, err := execsink.ParseSignal(v)
		s.ReloadSignal = sig
		return err
	})
	fs.DurationVar(&s.KillTimeout, "kill-timeout", 10*time.Second, "On shutdown, wait this long after SIGTERM for the -- command before SIGKILL.")
	fs.BoolVar(&s.Once, "once", false, "Exit after the first delivery (init-container mode) even without -on-start, e.g. to write a hosts file in an init container.")
}

// completeSinks validates the sink flags.
func (c *Config) completeSinks(env Env) error {
	s := &c.Sinks
	if s.HostsID == "" {
		s.HostsID = cmp.Or(c.Service, "peer-finder") // no service: -source=pods alone
	}
	if !validID(s.HostsID) {
		return usage("hosts-id", "%q: want 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit", s.HostsID)
	}
	if _, err := hostsfile.NewNamer(s.NameTemplate, nil, s.IndexLabel); err != nil {
		return usage("hosts-name-template", "%v", err)
	}
	if _, err := hostsfile.NewNamer(s.NameTemplate, s.AliasTemplates, s.IndexLabel); err != nil {
		return usage("hosts-alias-template", "%v", err)
	}
	if err := execsink.CheckReloadSignal(s.ReloadSignal); err != nil {
		return usage("reload-signal", "%v", err)
	}
	outputs := map[string]string{"hosts-file": s.HostsFile, "json-file": s.JSONFile, "mpi-hostfile": s.MPIHostfile, "rendezvous-file": s.RendezvousFile}
	if first, second, ok := sharedOutput(outputs); ok {
		return usage(second, "%q names the same file as -%s %q: each file output needs its own file", outputs[second], first, outputs[first])
	}
	if err := c.completeExpectAuto(env); err != nil {
		return err
	}
	var err error
	switch {
	case s.ExpectAuto:
	case strings.TrimSpace(s.ExpectSpec) != "":
		if s.Expected, err = hostsfile.ParseExpected(s.ExpectSpec); err != nil {
			return usage("hosts-expect", "%v", err)
		}
	case c.Bootstrap.Expect > 0 && (s.HostsFile != "" || s.MPIHostfile != "" || s.Rendezvous != ""):
		if s.Expected, err = hostsfile.ExpectedFromCount(c.Hostname, c.Bootstrap.Expect); err != nil {
			return usage("hosts-expect", "not set and %v", err)
		}
	}
	switch {
	case s.WaitForAll && s.HostsFile == "":
		return usage("wait-for-all", "needs -hosts-file")
	case s.WaitForAll && len(s.Expected) == 0 && !s.ExpectAuto:
		return usage("wait-for-all", "needs expected names: -hosts-expect, or -expect N")
	case s.HostsLease != "" && s.HostsFile == "":
		return usage("hosts-lease", "needs -hosts-file")
	case s.HostsLease != "" && !isSubdomain(s.HostsLease):
		return usage("hosts-lease", "%q is not a valid object name (lower-case DNS subdomain)", s.HostsLease)
	case s.ReloadSignal != 0 && s.Exec == nil:
		return usage("reload-signal", "needs a command after --")
	case s.KillTimeout <= 0:
		return usage("kill-timeout", "must be positive, got %v", s.KillTimeout)
	case s.Once && s.Exec != nil:
		return usage("once", "cannot be combined with a command after --")
	}
	return c.completeJobFiles()
}

// completeJobFiles validates the MPI hostfile and rendezvous flags.
func (c *Config) completeJobFiles() error {
	s := &c.Sinks
	switch {
	case s.mpiSlotsSet && s.MPIHostfile == "":
		return usage("mpi-slots", "needs -mpi-hostfile")
	case len(s.MPIRoles) > 0 && s.MPIHostfile == "":
		return usage("mpi-roles", "needs -mpi-hostfile")
	}
	if s.MPISlots.Auto && !slices.Contains(c.Kube.Sources, SourcePods) {
		return usage("mpi-slots", "auto reads the pods' CPU requests: needs -source=pods")
	}
	if s.Rendezvous == "" {
		switch {
		case s.RendezvousFile != "":
			return usage("rendezvous-file", "needs -rendezvous")
		case s.RendezvousPort != 0:
			return usage("rendezvous-port", "needs -rendezvous")
		case len(s.RendezvousRoles) > 0:
			return usage("rendezvous-roles", "needs -rendezvous")
		}
		return nil
	}
	if s.RendezvousPort == 0 {
		s.RendezvousPort = s.Rendezvous.DefaultPort()
	}
	switch {
	case s.RendezvousPort < 1 || s.RendezvousPort > 65535:
		return usage("rendezvous-port", "%d: want 1 to 65535", s.RendezvousPort)
	case s.RendezvousFile == "" && s.Exec == nil:
		return usage("rendezvous", "needs -rendezvous-file or a command after --")
	case len(s.Expected) == 0 && !s.ExpectAuto:
		// A training job's world is fixed when it starts: its size cannot
		// be whatever members happen to be known then. With
		// -hosts-expect=auto the names are read from the Jobs at start,
		// before any sink is built.
		return usage("rendezvous", "needs expected names to rank: -hosts-expect, or -expect N")
	}
	return nil
}

// rolesFlag is the flag.Func of a list of roles (parseRoles) into dst.
func rolesFlag(dst *[]string) func(string) error {
	return func(v string) (err error) {
		*dst, err = parseRoles(v)
		return err
	}
}

// parseRoles parses a comma-separated list of roles: each a name that
// "<role>-0" is a valid host name of, no duplicates.
func parseRoles(v string) ([]string, error) {
	var roles []string
	for r := range strings.SplitSeq(v, ",") {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		if err := hostsfile.ValidName(r + "-0"); err != nil {
			return nil, fmt.Errorf("role %q: %w", r, err)
		}
		if slices.Contains(roles, r) {
			return nil, fmt.Errorf("role %q listed twice", r)
		}
		roles = append(roles, r)
	}
	if len(roles) == 0 {
		return nil, fmt.Errorf("%q: no role", v)
	}
	return roles, nil
}

// sharedOutput reports two flags of outputs (flag name to path; empty is
// unset) that name one file after filepath.Clean, the first in name order
// first. Relative paths are compared as given: both are relative to the
// working directory. Links are not followed.
func sharedOutput(outputs map[string]string) (first, second string, ok bool) {
	seen := make(map[string]string, len(outputs))
	for _, flag := range slices.Sorted(maps.Keys(outputs)) {
		if outputs[flag] == "" {
			continue
		}
		p := filepath.Clean(outputs[flag])
		if prev, dup := seen[p]; dup {
			return prev, flag, true
		}
		seen[p] = flag
	}
	return "", "", false
}

// validID reports whether id can name a hosts-file block: it is written into
// the marker lines, so no spaces, newlines or other bytes that would change
// what a marker is.
func validID(id string) bool {
	if id == "" || len(id) > 63 {
		return false
	}
	for i, r := range id {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (i == 0 || r != '.' && r != '_' && r != '-') {
			return false
		}
	}
	return true
}
