// Package config parses peer-finder's command line into a Config. It keeps
// upstream peer-finder's single-dash Go flag syntax and its defaults, and
// adds flock's flags in the same style. Parsing is a function of the
// arguments and an Env, so it is unit-tested without touching the machine.
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink/hook"
	"github.com/flockd/flock/peerfinder/sink/hostsfile"
)

// UsageError is a problem with the command line; peer-finder exits with
// status 2 on it. Flag names the offending flag when there is one.
type UsageError struct {
	Flag string
	Err  error
}

func (e *UsageError) Error() string {
	switch e.Flag {
	case "":
		return e.Err.Error()
	case "--": // the command after it, not a flag
		return fmt.Sprintf("--: %v", e.Err)
	}
	return fmt.Sprintf("-%s: %v", e.Flag, e.Err)
}

func (e *UsageError) Unwrap() error { return e.Err }

func usage(flag string, format string, args ...any) error {
	return &UsageError{Flag: flag, Err: fmt.Errorf(format, args...)}
}

// Env is what parsing may read from the machine; main supplies the real one.
type Env struct {
	// Getenv reads an environment variable (POD_NAMESPACE).
	Getenv func(string) string
	// Hostname returns the OS host name.
	Hostname func() (string, error)
	// ResolvConf returns the contents of /etc/resolv.conf.
	ResolvConf func() ([]byte, error)
	// ServiceAccountNamespace returns the contents of the service account's
	// namespace file; nil means none.
	ServiceAccountNamespace func() ([]byte, error)
}

// Config is the parsed command line.
type Config struct {
	// Raw flag values, kept for diagnostics.
	OnStartRaw, OnChangeRaw string
	// OnStart and OnChange are the hooks' argv (nil when not set).
	OnStart, OnChange []string

	Service   string
	Namespace string
	// Domain is the cluster domain, e.g. "cluster.local"; DomainSource says
	// where it came from (the flag, or which resolv.conf search entry).
	Domain, DomainSource string
	Hostname             string
	// SelfIP is $POD_IP, read only without -service (see Self).
	SelfIP string
	// DNSServers are host:port; from -dns-server or resolv.conf nameservers.
	DNSServers []string

	PollPeriod time.Duration
	// DNSTimeout bounds each DNS query (-dns-timeout, else resolv.conf
	// options timeout:, else 2s); DNSAttempts is how many times the servers
	// are tried per lookup (resolv.conf options attempts:, else 1).
	DNSTimeout      time.Duration
	DNSAttempts     int
	MinPeers        int
	StableFor       time.Duration
	HookTimeout     time.Duration
	Format          hook.Format
	TrailingNewline bool

	LogFormat   string
	Verbosity   int
	MetricsAddr string
	// Diagnose asks for a one-shot report instead of running.
	Diagnose bool
	// ShowVersion asks for the version line instead of running; nothing
	// else is validated then.
	ShowVersion bool

	Kube      Kube      // Kubernetes API sources and bootstrap flags (kube.go)
	Bootstrap Bootstrap // expected size, bootstrap timeout, cluster record (bootstrap.go)
	Sinks     Sinks     // file and exec sink flags (sinks.go)
}

// ServiceFQDN is the governing service's name, e.g. "web.ns.svc.cluster.local".
func (c *Config) ServiceFQDN() string { return peer.FQDN("", c.Service, c.Namespace, c.Domain) }

// Self is this member's FQDN: <hostname>.<service>.<ns>.svc.<domain>.
// Without -service (only with -source=pods) it is the pod's IP name,
// <POD_IP with dashes>.<ns>.pod.<domain>, as the pods source names peers.
func (c *Config) Self() string {
	if c.Service == "" {
		return peer.PodFQDN(c.SelfIP, c.Namespace, c.Domain)
	}
	return peer.FQDN(c.Hostname, c.Service, c.Namespace, c.Domain)
}

// InitMode reports whether peer-finder exits after the first delivery, as
// upstream does when only -on-start is given, or with -once. Never with a
// command after "--": then peer-finder lives as long as that command.
func (c *Config) InitMode() bool {
	return c.Sinks.Exec == nil && (c.Sinks.Once || c.OnStart != nil && c.OnChange == nil)
}

// PrintUsage writes the usage text, generated from the flag definitions.
func PrintUsage(w io.Writer) {
	fs := NewFlagSet(&Config{}, w)
	fmt.Fprintf(w, "Usage: peer-finder [-service=NAME] [-ns=NS] [-on-start=CMD] [-on-change=CMD] [-hosts-file=PATH] [-json-file=PATH] [flags] [-- CMD [ARG...]]\n"+
		"       peer-finder status -l SELECTOR [-n NS] [-o table|json]   (each member's peers, role and what holds it back; peer-finder status -help)\n\n"+
		"-service is required unless -source=pods is the only source; at least one output is: -on-start, -on-change, -hosts-file, -json-file or -- CMD.\n\nFlags:\n")
	fs.PrintDefaults()
}

// NewFlagSet returns peer-finder's flags bound to c. It is exported so the
// README's flag reference is generated from the same definitions.
func NewFlagSet(c *Config, output io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("peer-finder", flag.ContinueOnError)
	fs.SetOutput(output)
	// Upstream-compatible flags.
	fs.StringVar(&c.OnStartRaw, "on-start", "", "Script to run on the first delivery of the peer set (init-container mode when it is the only hook: peer-finder exits after it succeeded). A path, or a command line split by shell-word rules without a shell.")
	fs.StringVar(&c.OnChangeRaw, "on-change", "", "Script to run on every change of the peer set (and on the first delivery when -on-start is not set).")
	fs.StringVar(&c.Service, "service", "", "Governing headless service whose members are the peers (lowercased: DNS names are case-insensitive). Required, except with -source=pods alone (a Deployment or Job): then peers are named by IP, <ip-with-dashes>.<ns>.pod.<domain>, and $POD_IP (downward API status.podIP) identifies this member.")
	fs.StringVar(&c.Namespace, "ns", "", "Namespace of the service (lowercased); default $POD_NAMESPACE, else the service account's namespace file.")
	fs.StringVar(&c.Domain, "domain", "", "Cluster domain, e.g. cluster.local; default inferred from the <ns>.svc.<domain> entry of the /etc/resolv.conf search list.")
	// flock's flags.
	fs.StringVar(&c.Hostname, "hostname", "", "This member's host name (the first label of its FQDN); default the OS host name.")
	fs.Func("dns-server", "DNS server `host:port` to query, repeatable; default the resolv.conf nameservers.", func(s string) error {
		if s = strings.TrimSpace(s); s == "" {
			return errors.New("empty server")
		}
		if _, _, err := net.SplitHostPort(s); err != nil {
			s = net.JoinHostPort(strings.Trim(s, "[]"), "53")
		}
		if _, _, err := splitHostPort(s); err != nil {
			return err
		}
		c.DNSServers = append(c.DNSServers, s)
		return nil
	})
	fs.DurationVar(&c.PollPeriod, "poll-period", time.Second, "Pause between DNS lookups, at least 50ms; failures back off from it up to 15s.")
	fs.DurationVar(&c.DNSTimeout, "dns-timeout", 0, "Timeout of each DNS query; default the resolv.conf options timeout:, else 2s.")
	fs.IntVar(&c.MinPeers, "min-peers", 1, "Deliver only when at least this many peers (self included) are visible.")
	fs.DurationVar(&c.StableFor, "stable-for", 0, "Deliver only when the peer set has not changed for this long (coalesces churn during rolling starts).")
	fs.DurationVar(&c.HookTimeout, "hook-timeout", 0, "Kill a hook's whole process group when it runs longer than this: 0 (no limit) or at least 1s.")
	fs.Func("format", "Hook stdin format: `lines` (sorted FQDNs joined by newlines, as upstream), lines-ip (each line the FQDN then the peer's IPs, space-separated) or json (a versioned document with every peer's fields).", func(s string) error {
		f, err := hook.ParseFormat(s)
		c.Format = f
		return err
	})
	fs.BoolVar(&c.TrailingNewline, "trailing-newline", false, "End the lines format with a newline, as while-read loops want (upstream sends none).")
	fs.StringVar(&c.LogFormat, "log-format", "text", "Log format: text or json.")
	fs.Var((*verbosity)(&c.Verbosity), "v", "Log verbosity: -v or -v=1 adds debug logs.")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", "", "Serve /metrics, /healthz and /readyz on this `address`, e.g. :9090; empty disables.")
	fs.BoolVar(&c.Diagnose, "diagnose", false, "Print what peer-finder sees and which gate holds delivery back, then exit: 0 when it would deliver, 1 otherwise.")
	fs.BoolVar(&c.ShowVersion, "version", false, "Print the version, commit and Go version, then exit.")
	c.addKubeFlags(fs)
	c.addBootstrapFlags(fs)
	c.addSinkFlags(fs)
	return fs
}

// verbosity is an int flag that also accepts a bare -v.
type verbosity int

func (v *verbosity) String() string   { return strconv.Itoa(int(*v)) }
func (v *verbosity) IsBoolFlag() bool { return true }
func (v *verbosity) Set(s string) error {
	if s == "true" {
		*v = 1
		return nil
	}
	if s == "false" {
		*v = 0
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return errors.New("want a level such as 1")
	}
	*v = verbosity(n)
	return nil
}

// Parse parses args (without the program name). It returns a *UsageError
// for bad input, or flag.ErrHelp when -h or -help was asked for. With
// -version it returns a Config with only ShowVersion set.
func Parse(args []string, env Env) (*Config, error) {
	c := &Config{}
	fs := NewFlagSet(c, io.Discard)
	repeated := countSets(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, &UsageError{Err: err} // the flag package names the flag
	}
	if r := *repeated; r != nil {
		return nil, usage(r.name, "given twice (%q, then %q): it takes one value", r.first, r.second)
	}
	if c.ShowVersion {
		return c, nil
	}
	if fs.NArg() > 0 {
		// "peer-finder [flags] -- CMD ARGS...": the exec sink's command.
		if i := len(args) - fs.NArg(); i > 0 && args[i-1] == "--" {
			c.Sinks.Exec = fs.Args()
		} else {
			return nil, usage("", "unexpected argument %q (put a command to run after --)", fs.Arg(0))
		}
	}
	return c, c.complete(env)
}

// repeatableFlags take a value each time they are given; every other flag
// takes one.
var repeatableFlags = []string{"dns-server", "hosts-alias-template"}

// repeat is the first single-value flag given a second time.
type repeat struct{ name, first, second string }

// countSets makes fs record, in the returned repeat, the first flag not in
// repeatableFlags that is set twice: Go's flag package keeps the last value,
// so -on-change=A -on-change=B would silently run only B.
func countSets(fs *flag.FlagSet) **repeat {
	var found *repeat
	fs.VisitAll(func(f *flag.Flag) {
		if !slices.Contains(repeatableFlags, f.Name) {
			f.Value = &onceValue{Value: f.Value, name: f.Name, found: &found}
		}
	})
	return &found
}

// onceValue wraps a flag's Value and notes a second Set.
type onceValue struct {
	flag.Value
	name  string
	first *string // the value given first; nil until set
	found **repeat
}

func (v *onceValue) Set(s string) error {
	if v.first != nil && *v.found == nil {
		*v.found = &repeat{name: v.name, first: *v.first, second: s}
	}
	v.first = &s
	return v.Value.Set(s)
}

// IsBoolFlag keeps -once and -v usable without a value.
func (v *onceValue) IsBoolFlag() bool {
	b, ok := v.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// complete validates the flags and fills in defaults from env.
func (c *Config) complete(env Env) error {
	var err error
	if c.OnStartRaw != "" {
		if c.OnStart, err = hook.ParseCommand(c.OnStartRaw); err != nil {
			return usage("on-start", "%v", err)
		}
	}
	if c.OnChangeRaw != "" {
		if c.OnChange, err = hook.ParseCommand(c.OnChangeRaw); err != nil {
			return usage("on-change", "%v", err)
		}
	}
	if c.OnStart == nil && c.OnChange == nil && !c.Diagnose && !c.Sinks.Any() {
		return usage("on-start", "set -on-start and/or -on-change (or -hosts-file, -json-file, -- CMD)")
	}
	c.Service = strings.ToLower(strings.TrimSpace(c.Service))
	switch {
	case c.Service == "" && !slices.Equal(c.Kube.Sources, []string{SourcePods}):
		return usage("service", "required: the governing headless service (only -source=pods runs without one)")
	case c.Service == "":
		if env.Getenv != nil {
			c.SelfIP = env.Getenv("POD_IP")
		}
		if net.ParseIP(c.SelfIP) == nil {
			return usage("service", "without -service, set POD_IP from the downward API (fieldPath status.podIP), got %q: peers are then named by IP, <ip-with-dashes>.<ns>.pod.<domain>", c.SelfIP)
		}
	case !isLabel(c.Service):
		return usage("service", "%q is not a valid service name (a DNS label)", c.Service)
	}
	if c.Namespace == "" && env.Getenv != nil {
		c.Namespace = env.Getenv("POD_NAMESPACE")
	}
	if c.Namespace == "" && env.ServiceAccountNamespace != nil {
		if b, err := env.ServiceAccountNamespace(); err == nil {
			c.Namespace = strings.TrimSpace(string(b))
		}
	}
	if c.Namespace = strings.ToLower(c.Namespace); c.Namespace == "" {
		return usage("ns", "required: pass -ns, set POD_NAMESPACE, or run with a service account token mounted")
	}
	if !isLabel(c.Namespace) {
		return usage("ns", "%q is not a valid namespace", c.Namespace)
	}
	if c.Hostname == "" {
		if env.Hostname == nil {
			return usage("hostname", "required")
		}
		if c.Hostname, err = env.Hostname(); err != nil {
			return usage("hostname", "cannot read the OS host name, pass -hostname: %v", err)
		}
		// setHostnameAsFQDN: the OS host name is the pod's FQDN.
		c.Hostname, _, _ = strings.Cut(c.Hostname, ".")
	}
	c.Hostname = strings.ToLower(c.Hostname)
	if !isLabel(c.Hostname) {
		return usage("hostname", "%q is not a DNS label; pass the pod's host name (the first label of its FQDN)", c.Hostname)
	}
	var resolv *ResolvConf
	needServers := len(c.DNSServers) == 0 && c.Kube.UsesDNS() // only the dns source queries servers
	if c.Domain == "" || needServers {
		resolv, err = readResolvConf(env)
		if err != nil && c.Domain == "" {
			return usage("domain", "not set and %v", err)
		}
		if err != nil {
			return usage("dns-server", "not set and %v", err)
		}
	}
	if c.Domain == "" {
		d, why, err := InferDomain(resolv, c.Namespace)
		if err != nil {
			return usage("domain", "%v", err)
		}
		c.Domain, c.DomainSource = d, why
	} else {
		c.Domain = strings.Trim(strings.ToLower(c.Domain), ".")
		c.DomainSource = "-domain flag"
		if err := validDomain(c.Domain); err != nil {
			return usage("domain", "%v", err)
		}
	}
	if self := c.Self(); len(self) > maxNameLen {
		return usage("domain", "this member's FQDN %s is %d octets, more than the %d a DNS name may have, so no answer can hold it; shorten -domain (%s), -service, -ns or -hostname",
			self, len(self), maxNameLen, c.DomainSource)
	}
	c.DNSAttempts = 1
	if resolv != nil {
		if c.DNSTimeout == 0 {
			c.DNSTimeout = resolv.Timeout
		}
		c.DNSAttempts = max(resolv.Attempts, 1)
	}
	if c.DNSTimeout == 0 {
		c.DNSTimeout = defaultDNSTimeout
	}
	if needServers {
		if len(resolv.Servers) == 0 {
			return usage("dns-server", "not set and /etc/resolv.conf lists no nameserver")
		}
		c.DNSServers = resolv.Servers
	}
	switch {
	case c.PollPeriod < MinPollPeriod:
		return usage("poll-period", "must be at least %v, got %v", MinPollPeriod, c.PollPeriod)
	case c.DNSTimeout < 0:
		return usage("dns-timeout", "must not be negative, got %v", c.DNSTimeout)
	case c.Bootstrap.Expect > MaxMembers:
		return usage("expect", "at most %d members, got %d", MaxMembers, c.Bootstrap.Expect)
	case c.MinPeers < 0:
		return usage("min-peers", "must not be negative, got %d", c.MinPeers)
	case c.StableFor < 0:
		return usage("stable-for", "must not be negative, got %v", c.StableFor)
	case c.HookTimeout != 0 && c.HookTimeout < MinHookTimeout:
		return usage("hook-timeout", "must be 0 (no limit) or at least %v, got %v", MinHookTimeout, c.HookTimeout)
	case !slices.Contains([]string{"text", "json"}, c.LogFormat):
		return usage("log-format", "want text or json, got %q", c.LogFormat)
	}
	if c.MetricsAddr != "" {
		if _, _, err := splitHostPortZero(c.MetricsAddr); err != nil {
			return usage("metrics-addr", "%q: %v", c.MetricsAddr, err)
		}
	}
	if err := c.completeKube(env); err != nil {
		return err
	}
	if err := c.completeBootstrap(env); err != nil {
		return err
	}
	return c.completeSinks(env)
}

// Bounds of the command line.
const (
	// MinPollPeriod is the shortest -poll-period: at most 20 lookups a second.
	MinPollPeriod = 50 * time.Millisecond
	// MinHookTimeout is the shortest -hook-timeout other than 0: a shorter
	// one kills a hook before a shell has started (1ns was accepted).
	MinHookTimeout = time.Second
	// maxNameLen is the longest DNS name in octets, without the final dot
	// (RFC 1035 limits names to 255 octets on the wire).
	maxNameLen = 253
	// MaxMembers bounds -expect and the names of -hosts-expect.
	MaxMembers = hostsfile.MaxExpected
	// defaultDNSTimeout is the query timeout without -dns-timeout or a
	// resolv.conf timeout: option.
	defaultDNSTimeout = 2 * time.Second
)

// validDomain reports why d (lower case, without outer dots) is not a
// cluster domain: an RFC 1123 subdomain such as cluster.local.
func validDomain(d string) error {
	if d == "" {
		return errors.New("empty domain")
	}
	if errs := validation.IsDNS1123Subdomain(d); len(errs) > 0 {
		return fmt.Errorf("%q is not a valid domain: %s", d, strings.Join(errs, "; "))
	}
	return nil
}

// isLabel reports whether s is an RFC 1123 DNS label.
func isLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}
