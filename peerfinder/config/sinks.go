package config

import (
	"cmp"
	"flag"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/flockd/flock/internal/atomicfile"
	execsink "github.com/flockd/flock/peerfinder/sink/exec"
	"github.com/flockd/flock/peerfinder/sink/hostsfile"
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
func (s Sinks) Any() bool { return s.HostsFile != "" || s.JSONFile != "" || s.Exec != nil }

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
	outputs := map[string]string{"hosts-file": s.HostsFile, "json-file": s.JSONFile}
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
	case c.Bootstrap.Expect > 0 && s.HostsFile != "":
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
	return nil
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
