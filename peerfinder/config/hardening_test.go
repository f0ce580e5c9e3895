package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Bad values found by the adversarial review of issue 11 (#6, #7, #10, #11,
// #12, #16, #18): each exits 2 naming where the bad value came from.
func TestParseRejectsHostileValues(t *testing.T) {
	base := []string{"-on-start=/bin/true", "-service=web", "-ns=ns1"}
	long := "search " + strings.Repeat("a", 70*1024) + "\nnameserver 10.0.0.1\n"
	tests := []struct {
		name   string
		args   []string
		resolv string
		where  string // must appear in the message
	}{
		{"hosts-id with a newline", append(base, "-hosts-file=/tmp/h", "-hosts-id=a\n10.0.0.1 evil"), kubeletResolv, "-hosts-id"},
		{"hosts-id with a trailing space", append(base, "-hosts-file=/tmp/h", "-hosts-id=web "), kubeletResolv, "-hosts-id"},
		{"domain dot", append(base, "-domain=."), kubeletResolv, "-domain"},
		{"domain dots", append(base, "-domain=.."), kubeletResolv, "-domain"},
		{"domain with a space", append(base, "-domain=bad domain"), kubeletResolv, "-domain"},
		{"domain blank", append(base, "-domain= "), kubeletResolv, "-domain"},
		{"search entry with invalid characters", base, "search ns1.svc.clu$ter.local\nnameserver 10.0.0.1\n", "resolv.conf"},
		{"search entry with a NUL byte", base, "search ns1.svc.cluster\x00.local\nnameserver 10.0.0.1\n", "resolv.conf"},
		{"inferred domain not a name", base, "search svC.!\nnameserver 10.0.0.1\n", "resolv.conf"},
		{"nameserver not an IP", append(base, "-domain=cluster.local"), "nameserver not-an-ip\n", "resolv.conf"},
		{"search line over 64 KiB", base, long, "64 KiB"},
		{"huge expect", append(base, "-expect=2000000000"), kubeletResolv, "-expect"},
		{"huge hosts-expect", append(base, "-hosts-file=/tmp/h", "-hosts-expect=web=2000000000"), kubeletResolv, "-hosts-expect"},
		{"poll-period below the floor", append(base, "-poll-period=1ns"), kubeletResolv, "-poll-period"},
		{"negative dns-timeout", append(base, "-dns-timeout=-1s"), kubeletResolv, "-dns-timeout"},
		{"alias template error", append(base, "-hosts-file=/tmp/h", "-hosts-alias-template={{.Nope"), kubeletResolv, "-hosts-alias-template"},
		{"metrics-addr without port", append(base, "-metrics-addr=notanaddr"), kubeletResolv, "-metrics-addr"},
		{"metrics-addr port out of range", append(base, "-metrics-addr=:99999"), kubeletResolv, "-metrics-addr"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.args, env(nil, tt.resolv))
			var ue *UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("err = %v, want a UsageError", err)
			}
			if !strings.Contains(err.Error(), tt.where) {
				t.Errorf("%q does not name %s", err, tt.where)
			}
		})
	}
}

// DNS names are case-insensitive: -service and -ns are lowercased, so self
// is web-0.web.ns1.svc..., as the server answers (issue 11 #7).
func TestParseLowercasesServiceAndNamespace(t *testing.T) {
	c, err := Parse([]string{"-on-start=/bin/true", "-service=WEB", "-ns=NS1"}, env(nil, kubeletResolv))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Self(), "web-0.web.ns1.svc.cluster.local"; got != want {
		t.Errorf("Self() = %q, want %q", got, want)
	}
	if c.Domain != "cluster.local" {
		t.Errorf("Domain = %q, want cluster.local (from the ns1 entry)", c.Domain)
	}
}

// resolv.conf options timeout: and attempts: are honoured; -dns-timeout
// wins over them (issue 11 #12).
func TestDNSTimeoutFromResolvConf(t *testing.T) {
	resolv := "search ns1.svc.cluster.local\nnameserver 10.0.0.1\noptions ndots:5 timeout:3 attempts:4\n"
	base := []string{"-on-start=/bin/true", "-service=web", "-ns=ns1"}
	for _, tc := range []struct {
		name     string
		args     []string
		resolv   string
		timeout  time.Duration
		attempts int
	}{
		{"defaults", base, kubeletResolv, 2 * time.Second, 1},
		{"resolv.conf options", base, resolv, 3 * time.Second, 4},
		{"flag wins", append(base, "-dns-timeout=500ms"), resolv, 500 * time.Millisecond, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(tc.args, env(nil, tc.resolv))
			if err != nil {
				t.Fatal(err)
			}
			if c.DNSTimeout != tc.timeout || c.DNSAttempts != tc.attempts {
				t.Errorf("DNSTimeout, DNSAttempts = %v, %d; want %v, %d", c.DNSTimeout, c.DNSAttempts, tc.timeout, tc.attempts)
			}
		})
	}
}
