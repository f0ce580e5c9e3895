package config

import (
	"errors"
	"flag"
	"slices"
	"strings"
	"testing"
	"time"
)

const kubeletResolv = `search ns1.svc.cluster.local svc.cluster.local cluster.local
nameserver 10.96.0.10
options ndots:5
`

func env(vars map[string]string, resolv string) Env {
	return Env{
		Getenv:     func(k string) string { return vars[k] },
		Hostname:   func() (string, error) { return "web-0", nil },
		ResolvConf: func() ([]byte, error) { return []byte(resolv), nil },
	}
}

func TestParseUpstreamCommandLine(t *testing.T) {
	// Kubernetes' ZooKeeper example: quotes arrive literally through args:.
	c, err := Parse([]string{`-on-start="/work-dir/on-start.sh"`, "-service=zk-hs"}, env(map[string]string{"POD_NAMESPACE": "ns1"}, kubeletResolv))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.OnStart, []string{"/work-dir/on-start.sh"}) || c.OnChange != nil || !c.InitMode() {
		t.Errorf("hooks = %q %q init=%v", c.OnStart, c.OnChange, c.InitMode())
	}
	if got, want := c.Self(), "web-0.zk-hs.ns1.svc.cluster.local"; got != want {
		t.Errorf("self = %q, want %q", got, want)
	}
	if !slices.Equal(c.DNSServers, []string{"10.96.0.10:53"}) || c.PollPeriod != time.Second || c.MinPeers != 1 {
		t.Errorf("defaults: servers %v poll %v min %d", c.DNSServers, c.PollPeriod, c.MinPeers)
	}
	if !strings.Contains(c.DomainSource, "ns1.svc.cluster.local") {
		t.Errorf("domain source = %q", c.DomainSource)
	}
}

func TestParseFlagSyntaxes(t *testing.T) {
	for _, args := range [][]string{
		{"-on-change=/bin/true", "-service=web", "-ns=ns1", "-domain=example.org"},
		{"-on-change", "/bin/true", "-service", "web", "-ns", "ns1", "-domain", "example.org"},
		{"--on-change=/bin/true", "--service=web", "--ns=ns1", "--domain=example.org."},
	} {
		c, err := Parse(args, env(nil, "nameserver 10.0.0.1\n"))
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if c.Self() != "web-0.web.ns1.svc.example.org" || c.InitMode() {
			t.Errorf("%v: self %q init %v", args, c.Self(), c.InitMode())
		}
	}
}

func TestParseNewFlags(t *testing.T) {
	c, err := Parse([]string{"-on-start=/bin/true", "-on-change", "/bin/echo 'a b'", "-service=web", "-ns=ns1",
		"-hostname=Web-3", "-dns-server=127.0.0.1:5353", "-dns-server=10.0.0.1", "-poll-period=2s", "-min-peers=3",
		"-stable-for=5s", "-hook-timeout=1m", "-log-format=json", "-v", "-format=json", "-trailing-newline"}, env(nil, kubeletResolv))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Hostname: "web-3", DNSServers: []string{"127.0.0.1:5353", "10.0.0.1:53"}, PollPeriod: 2 * time.Second,
		MinPeers: 3, StableFor: 5 * time.Second, HookTimeout: time.Minute, LogFormat: "json", Verbosity: 1, Format: "json", TrailingNewline: true}
	if c.Hostname != want.Hostname || !slices.Equal(c.DNSServers, want.DNSServers) || c.PollPeriod != want.PollPeriod ||
		c.MinPeers != want.MinPeers || c.StableFor != want.StableFor || c.HookTimeout != want.HookTimeout ||
		c.LogFormat != want.LogFormat || c.Verbosity != want.Verbosity || c.Format != want.Format || c.TrailingNewline != want.TrailingNewline {
		t.Errorf("got %+v", c)
	}
	if !slices.Equal(c.OnChange, []string{"/bin/echo", "a b"}) || c.InitMode() {
		t.Errorf("on-change argv = %q", c.OnChange)
	}
	if c, _ := Parse([]string{"-on-start=/bin/true", "-service=web", "-ns=a", "-v=3"}, env(nil, kubeletResolv)); c == nil || c.Verbosity != 3 {
		t.Errorf("-v=3 not parsed: %+v", c)
	}
}

func TestParseUsageErrors(t *testing.T) {
	base := []string{"-on-start=/bin/true", "-service=web", "-ns=ns1"}
	tests := []struct {
		args   []string
		resolv string
		flag   string // must appear in the message
	}{
		{[]string{"-service=web", "-ns=ns1"}, kubeletResolv, "-on-start"},
		{[]string{"-on-start=/bin/true", "-ns=ns1"}, kubeletResolv, "-service"},
		{[]string{"-on-start=/bin/true", "-service=web"}, kubeletResolv, "-ns"},
		{append(base, "-poll-period=0s"), kubeletResolv, "-poll-period"},
		{append(base, "-poll-period=soon"), kubeletResolv, "-poll-period"},
		{append(base, "-min-peers=-1"), kubeletResolv, "-min-peers"},
		{append(base, "-stable-for=-1s"), kubeletResolv, "-stable-for"},
		{append(base, "-log-format=xml"), kubeletResolv, "-log-format"},
		{append(base, "-format=yaml"), kubeletResolv, "-format"},
		{append(base, "-dns-server=host:99999"), kubeletResolv, "-dns-server"},
		{append(base, "-v=many"), kubeletResolv, "-v"},
		{append(base, "-no-such-flag"), kubeletResolv, "-no-such-flag"},
		{append(base, "-hostname=web_0"), kubeletResolv, "-hostname"},
		{[]string{`-on-start="unterminated`, "-service=web", "-ns=ns1"}, kubeletResolv, "-on-start"},
		{base, "nameserver 10.0.0.1\n", "-domain"},
		{base, "search example.com\nnameserver 10.0.0.1\n", "-domain"},
		{append(base, "-domain=cluster.local"), "search ns1.svc.cluster.local\n", "-dns-server"},
		{append(base, "stray"), kubeletResolv, "stray"},
		{append(base, "-source=static"), kubeletResolv, "-static-file"},
		{append(base, "-static-file=/tmp/peers"), kubeletResolv, "-static-file"},
	}
	for _, tt := range tests {
		_, err := Parse(tt.args, env(nil, tt.resolv))
		var ue *UsageError
		if !errors.As(err, &ue) {
			t.Errorf("%v: err = %v, want a UsageError", tt.args, err)
			continue
		}
		if !strings.Contains(err.Error(), tt.flag) {
			t.Errorf("%v: %q does not name %s", tt.args, err, tt.flag)
		}
	}
	if _, err := Parse([]string{"-help"}, env(nil, "")); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-help: err = %v", err)
	}
}

func TestInferDomain(t *testing.T) {
	tests := []struct {
		name, resolv, ns, want string
	}{
		{"kubelet", kubeletResolv, "ns1", "cluster.local"},
		{"custom domain", "search ns1.svc.k8s.example.com svc.k8s.example.com k8s.example.com\n", "ns1", "k8s.example.com"},
		{"EKS extra search domains first", "search ec2.internal ns1.svc.cluster.local svc.cluster.local cluster.local\n", "ns1", "cluster.local"},
		{"other namespace's entry", "search other.svc.cluster.local svc.cluster.local\n", "ns1", "cluster.local"},
		{"namespace whose name ends like another", "search xns1.svc.wrong svc.right\n", "ns1", "right"},
		{"trailing dots and case", "search NS1.svc.Cluster.Local.\n", "ns1", "cluster.local"},
		{"no search line", "nameserver 1.1.1.1\n", "ns1", ""},
		{"no svc entry", "search corp.example.com\n", "ns1", ""},
	}
	for _, tt := range tests {
		rc, err := ParseResolvConf([]byte(tt.resolv))
		if err != nil {
			t.Fatal(err)
		}
		got, why, err := InferDomain(rc, tt.ns)
		if got != tt.want || (err == nil) != (tt.want != "") {
			t.Errorf("%s: got %q (%v), want %q", tt.name, got, err, tt.want)
		}
		if err != nil && !strings.Contains(err.Error(), "-domain") {
			t.Errorf("%s: error does not say what to pass: %v", tt.name, err)
		}
		if err == nil && why == "" {
			t.Errorf("%s: no reason given", tt.name)
		}
	}
}

func TestParseBootstrapFlags(t *testing.T) {
	vars := map[string]string{"POD_NAMESPACE": "ns1", "POD_NAME": "db-0", "POD_UID": "u0"}
	tests := []struct {
		args     []string
		want     Bootstrap
		wantFlag string // the flag a usage error names
	}{
		{args: nil, want: Bootstrap{PodName: "db-0", PodUID: "u0"}},
		{args: []string{"-expect=3"}, want: Bootstrap{Expect: 3, PodName: "db-0", PodUID: "u0"}},
		{args: []string{"-expect", "auto", "-cluster-lease=db-formed", "-bootstrap-timeout=2m"},
			want: Bootstrap{ExpectAuto: true, ClusterLease: "db-formed", Timeout: 2 * time.Minute, PodName: "db-0", PodUID: "u0"}},
		{args: []string{"-expect=-1"}, wantFlag: "expect"},
		{args: []string{"-expect=many"}, wantFlag: "expect"},
		{args: []string{"-bootstrap-timeout=-1s"}, wantFlag: "bootstrap-timeout"},
		{args: []string{"-cluster-lease=Not_A_Name"}, wantFlag: "cluster-lease"},
		{args: []string{"-expect=3", "-cluster-lease=db-formed", "-form-rank=/rank.sh --seqno", "-form-rank-quorum=2"},
			want: Bootstrap{Expect: 3, ClusterLease: "db-formed", FormRank: "/rank.sh --seqno", FormRankQuorum: 2, PodName: "db-0", PodUID: "u0"}},
		{args: []string{"-expect=auto", "-cluster-lease=db-formed", "-form-rank=/rank.sh"},
			want: Bootstrap{ExpectAuto: true, ClusterLease: "db-formed", FormRank: "/rank.sh", PodName: "db-0", PodUID: "u0"}},
		{args: []string{"-expect=3", "-form-rank=/rank.sh"}, wantFlag: "form-rank"},                                    // the decision must be recorded
		{args: []string{"-cluster-lease=db-formed", "-form-rank=/rank.sh"}, wantFlag: "form-rank"},                     // every expected member: how many?
		{args: []string{"-expect=3", "-cluster-lease=db-formed", "-form-rank='unclosed"}, wantFlag: "form-rank"},       // not a command line
		{args: []string{"-expect=3", "-cluster-lease=db-formed", "-form-rank-quorum=2"}, wantFlag: "form-rank-quorum"}, // without -form-rank
		{args: []string{"-expect=3", "-cluster-lease=db-formed", "-form-rank=/rank.sh", "-form-rank-quorum=-1"}, wantFlag: "form-rank-quorum"},
		{args: []string{"-expect=3", "-cluster-lease=db-formed", "-form-rank=/rank.sh", "-form-rank-quorum=4"}, wantFlag: "form-rank-quorum"},
	}
	for _, tt := range tests {
		args := append([]string{"-on-start=/bin/true", "-service=db", "-domain=cluster.local", "-dns-server=10.0.0.1"}, tt.args...)
		c, err := Parse(args, env(vars, ""))
		if tt.wantFlag != "" {
			if err == nil || !strings.Contains(err.Error(), "-"+tt.wantFlag) {
				t.Errorf("%v: err = %v, want a usage error naming -%s", tt.args, err, tt.wantFlag)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tt.args, err)
			continue
		}
		if c.Bootstrap != tt.want {
			t.Errorf("%v: bootstrap = %+v, want %+v", tt.args, c.Bootstrap, tt.want)
		}
	}
	// Without POD_NAME the pod name is the host name.
	c, err := Parse([]string{"-on-start=/bin/true", "-service=db", "-ns=ns1", "-domain=cluster.local", "-dns-server=10.0.0.1"}, env(nil, ""))
	if err != nil || c.Bootstrap.PodName != "web-0" || c.Bootstrap.NeedsAPI() {
		t.Errorf("pod name = %q (%v), needs API %v", c.Bootstrap.PodName, err, c.Bootstrap.NeedsAPI())
	}
}
