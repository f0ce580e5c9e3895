package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseKubeFlags(t *testing.T) {
	base := []string{"-on-change=/bin/true", "-service=web", "-ns=ns1"}
	tests := []struct {
		args []string
		want Kube
	}{
		{base, Kube{Sources: []string{"dns"}}},
		{append(base, "-source=endpointslice", "-include-not-ready", "-kubeconfig=/k"),
			Kube{Kubeconfig: "/k", Sources: []string{"endpointslice"}, IncludeNotReady: true}},
		{append(base, "-source", "endpointslice,dns"), Kube{Sources: []string{"endpointslice", "dns"}}},
		{append(base, "--source=pods", "-selector=app=zk,tier in (db)"),
			Kube{Sources: []string{"pods"}, Selector: "app=zk,tier in (db)"}},
		{append(base, "-source=pods", "-selector-from-self=app,app.kubernetes.io/component"),
			Kube{Sources: []string{"pods"}, SelectorFromSelf: []string{"app", "app.kubernetes.io/component"}}},
	}
	for _, tt := range tests {
		c, err := Parse(tt.args, env(nil, kubeletResolv))
		if err != nil {
			t.Errorf("%v: %v", tt.args, err)
			continue
		}
		got := c.Kube
		if got.Kubeconfig != tt.want.Kubeconfig || !slices.Equal(got.Sources, tt.want.Sources) ||
			got.IncludeNotReady != tt.want.IncludeNotReady || got.Selector != tt.want.Selector ||
			!slices.Equal(got.SelectorFromSelf, tt.want.SelectorFromSelf) {
			t.Errorf("%v: got %+v, want %+v", tt.args, got, tt.want)
		}
	}
}

func TestParseKubeSourcesNeedNoNameserver(t *testing.T) {
	args := []string{"-on-change=/bin/true", "-service=web", "-ns=ns1", "-source=endpointslice"}
	c, err := Parse(args, env(nil, "search ns1.svc.cluster.local\n"))
	if err != nil {
		t.Fatalf("endpointslice without nameservers: %v", err)
	}
	if c.Domain != "cluster.local" {
		t.Errorf("domain %q", c.Domain)
	}
	if _, err := Parse(append(args, "-source=endpointslice,dns"), env(nil, "search ns1.svc.cluster.local\n")); err == nil {
		t.Error("dns source without nameservers: no error")
	}
}

func TestParseKubeUsageErrors(t *testing.T) {
	base := []string{"-on-change=/bin/true", "-service=web", "-ns=ns1"}
	tests := []struct {
		args []string
		flag string
	}{
		{append(base, "-source=etcd"), "-source"},
		{append(base, "-source=dns,dns"), "-source"},
		{append(base, "-source="), "-source"},
		{append(base, "-source=pods"), "-selector"},
		{append(base, "-source=pods", "-selector=app in ("), "-selector"},
		{append(base, "-source=pods", "-selector= "), "-selector"},
		{append(base, "-source=pods", "-selector=app=zk", "-selector-from-self=app"), "-selector"},
		{append(base, "-selector=app=zk"), "-selector"},
		{append(base, "-selector-from-self=app"), "-selector-from-self"},
		{append(base, "-source=pods", "-selector-from-self=Bad Key"), "-selector-from-self"},
		{append(base, "-include-not-ready"), "-include-not-ready"},
	}
	for _, tt := range tests {
		_, err := Parse(tt.args, env(nil, kubeletResolv))
		var ue *UsageError
		if !errors.As(err, &ue) {
			t.Errorf("%v: err = %v, want a UsageError", tt.args, err)
			continue
		}
		if !strings.Contains(err.Error(), tt.flag) {
			t.Errorf("%v: %q does not name %s", tt.args, err, tt.flag)
		}
	}
}
