package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// A single-value flag given twice is a usage error naming it (issue 36
// #20): Go's flag package keeps the last value, so -on-change=A
// -on-change=B ran only B without a word. Flags documented as repeatable
// stay repeatable.
func TestParseRejectsRepeatedSingleValueFlag(t *testing.T) {
	base := []string{"-on-start=/bin/true", "-service=web", "-ns=ns1"}
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"-service=web", "-ns=ns1", "-on-change=/bin/true", "-on-change=/bin/false"}, "-on-change"},
		{append(base, "-on-start=/bin/false"), "-on-start"},
		{append(base, "-service=other"), "-service"},
		{append(base, "-hook-timeout=1m", "--hook-timeout", "2m"), "-hook-timeout"},
		{append(base, "-once", "-once=false"), "-once"},
		{append(base, "-format=json", "-format=lines"), "-format"},
		{append(base, "-source=dns", "-source=static"), "-source"},
	} {
		_, err := Parse(tc.args, env(nil, kubeletResolv))
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.flag+": ") || !strings.Contains(err.Error(), "twice") {
			t.Errorf("Parse(%q) = %v; want a usage error naming %s given twice", tc.args, err, tc.flag)
		}
	}
	c, err := Parse(append(base, "-dns-server=10.0.0.1", "-dns-server=10.0.0.2", "-hosts-file=/tmp/h",
		"-hosts-alias-template={{.FQDN}}", "-hosts-alias-template={{.Name}}-a"), env(nil, kubeletResolv))
	if err != nil {
		t.Fatalf("repeatable flags: %v", err)
	}
	if want := []string{"10.0.0.1:53", "10.0.0.2:53"}; !slices.Equal(c.DNSServers, want) {
		t.Errorf("DNSServers = %q, want %q", c.DNSServers, want)
	}
	if len(c.Sinks.AliasTemplates) != 2 {
		t.Errorf("AliasTemplates = %q, want both", c.Sinks.AliasTemplates)
	}
}

// This member's FQDN longer than a DNS name may be (253 octets) can never
// be in an answer: peer-finder waited forever while -diagnose blamed DNS
// (issue 36 #20). It is a usage error naming the flag that made it long.
func TestParseRejectsSelfFQDNOver253Octets(t *testing.T) {
	label := strings.Repeat("a", 63)
	domain := strings.Join([]string{label, label, label, label[:49]}, ".") // 241 octets: a valid domain
	_, err := Parse([]string{"-on-start=/bin/true", "-service=web", "-ns=ns1", "-hostname=web-0", "-domain=" + domain}, env(nil, kubeletResolv))
	var ue *UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "-domain: ") || !strings.Contains(err.Error(), "253") {
		t.Fatalf("err = %v; want a usage error naming -domain and the 253-octet limit", err)
	}
	// Just fitting is fine: 253 octets.
	fit := strings.Repeat("b", 253-len("web-0.web.ns1.svc.")-len(label)-1) + "." + label
	c, err := Parse([]string{"-on-start=/bin/true", "-service=web", "-ns=ns1", "-hostname=web-0", "-domain=" + fit}, env(nil, kubeletResolv))
	if err != nil {
		t.Fatalf("a 253-octet FQDN: %v", err)
	}
	if n := len(c.Self()); n != 253 {
		t.Fatalf("self is %d octets, want 253", n)
	}
}

// -hook-timeout below MinHookTimeout is a usage error (issue 36 #20):
// 1ns was accepted and killed every hook before it could run.
func TestParseRejectsHookTimeoutBelowMinimum(t *testing.T) {
	base := []string{"-on-start=/bin/true", "-service=web", "-ns=ns1"}
	for _, v := range []string{"1ns", "999ms", "-1s"} {
		_, err := Parse(append(base, "-hook-timeout="+v), env(nil, kubeletResolv))
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "-hook-timeout: ") {
			t.Errorf("-hook-timeout=%s: err = %v; want a usage error naming -hook-timeout", v, err)
		}
	}
	for v, want := range map[string]time.Duration{"0": 0, "1s": time.Second, "1h": time.Hour} {
		c, err := Parse(append(base, "-hook-timeout="+v), env(nil, kubeletResolv))
		if err != nil || c.HookTimeout != want {
			t.Errorf("-hook-timeout=%s: HookTimeout %v, err %v; want %v", v, c.HookTimeout, err, want)
		}
	}
}
