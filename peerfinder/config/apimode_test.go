package config

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// API mode for Deployments and Jobs (issue 13 #6).
func TestParseWithoutService(t *testing.T) {
	e := env(map[string]string{"POD_NAMESPACE": "ns1", "POD_IP": "10.1.2.3"}, kubeletResolv)
	c, err := Parse([]string{"-on-start=/bin/true", "-source=pods", "-selector=app=api"}, e)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Self(), "10-1-2-3.ns1.pod.cluster.local"; got != want {
		t.Errorf("self = %q, want %q", got, want)
	}
	e6 := env(map[string]string{"POD_NAMESPACE": "ns1", "POD_IP": "fd00::7"}, kubeletResolv)
	if c, err := Parse([]string{"-on-start=/bin/true", "-source=pods", "-selector=app=api"}, e6); err != nil || c.Self() != "fd00--7.ns1.pod.cluster.local" {
		t.Errorf("IPv6 self = %v, %v", c, err)
	}
	for _, tt := range []struct {
		args []string
		vars map[string]string
	}{
		{[]string{"-on-start=/bin/true", "-source=pods", "-selector=app=api"}, map[string]string{"POD_NAMESPACE": "ns1"}},                    // no POD_IP
		{[]string{"-on-start=/bin/true", "-source=pods", "-selector=app=api"}, map[string]string{"POD_NAMESPACE": "ns1", "POD_IP": "web-0"}}, // not an IP
		{[]string{"-on-start=/bin/true", "-source=endpointslice"}, map[string]string{"POD_NAMESPACE": "ns1", "POD_IP": "10.1.2.3"}},
		{[]string{"-on-start=/bin/true", "-source=pods,dns", "-selector=app=api"}, map[string]string{"POD_NAMESPACE": "ns1", "POD_IP": "10.1.2.3"}},
	} {
		_, err := Parse(tt.args, env(tt.vars, kubeletResolv))
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "-service") {
			t.Errorf("%v %v: err = %v, want a usage error naming -service", tt.args, tt.vars, err)
		}
	}
}

func TestNamespaceFromServiceAccount(t *testing.T) {
	e := env(nil, kubeletResolv)
	e.ServiceAccountNamespace = func() ([]byte, error) { return []byte("ns1\n"), nil }
	c, err := Parse([]string{"-on-start=/bin/true", "-service=web"}, e)
	if err != nil || c.Namespace != "ns1" {
		t.Fatalf("namespace = %v, %v; want ns1 from the service account file", c, err)
	}
	e.Getenv = func(k string) string { return map[string]string{"POD_NAMESPACE": "ns2"}[k] }
	if c, err := Parse([]string{"-on-start=/bin/true", "-service=web"}, e); err != nil || c.Namespace != "ns2" {
		t.Errorf("POD_NAMESPACE does not win over the file: %v, %v", c, err)
	}
	e = env(nil, kubeletResolv)
	e.ServiceAccountNamespace = func() ([]byte, error) { return nil, os.ErrNotExist }
	if _, err := Parse([]string{"-on-start=/bin/true", "-service=web"}, e); err == nil || !strings.Contains(err.Error(), "-ns") {
		t.Errorf("no namespace anywhere: err = %v, want one naming -ns", err)
	}
}

// TestHostnameAsFQDN: with setHostnameAsFQDN the OS host name is the pod's
// FQDN; its first label is the member's host name.
func TestHostnameAsFQDN(t *testing.T) {
	e := env(map[string]string{"POD_NAMESPACE": "ns1"}, kubeletResolv)
	e.Hostname = func() (string, error) { return "web-0.web.ns1.svc.cluster.local", nil }
	c, err := Parse([]string{"-on-start=/bin/true", "-service=web"}, e)
	if err != nil {
		t.Fatal(err)
	}
	if c.Hostname != "web-0" || c.Self() != "web-0.web.ns1.svc.cluster.local" || c.Bootstrap.PodName != "web-0" {
		t.Errorf("hostname %q self %q pod %q", c.Hostname, c.Self(), c.Bootstrap.PodName)
	}
}

func TestEventsFlag(t *testing.T) {
	e := env(map[string]string{"POD_NAMESPACE": "ns1"}, kubeletResolv)
	for args, want := range map[string]bool{
		"":                                  false, // dns only: no API
		"-source=endpointslice":             true,
		"-source=endpointslice -events=off": false,
		"-events=on":                        true,
	} {
		c, err := Parse(append([]string{"-on-start=/bin/true", "-service=web"}, strings.Fields(args)...), e)
		if err != nil || c.EventsEnabled() != want {
			t.Errorf("%q: events %v (%v), want %v", args, c != nil && c.EventsEnabled(), err, want)
		}
	}
	_, err := Parse([]string{"-on-start=/bin/true", "-service=web", "-events=maybe"}, e)
	if err == nil || !strings.Contains(err.Error(), "-events") {
		t.Errorf("-events=maybe: err = %v, want one naming -events", err)
	}
}
