package config

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzInferDomain: whatever resolv.conf holds, a domain that is inferred is
// a valid DNS name, and parsing never panics.
func FuzzInferDomain(f *testing.F) {
	f.Add([]byte(kubeletResolv), "ns1")
	f.Add([]byte("search svC.!\nnameserver 10.0.0.1\n"), "default")
	f.Add([]byte("search ec2.internal ns1.svc.corp.example svc.corp.example\nnameserver 10.0.0.1\n"), "ns1")
	f.Fuzz(func(t *testing.T, data []byte, ns string) {
		rc, err := ParseResolvConf(data)
		if err != nil {
			return
		}
		for _, s := range rc.Servers {
			if _, _, err := splitHostPort(s); err != nil {
				t.Errorf("accepted server %q: %v", s, err)
			}
		}
		d, _, err := InferDomain(rc, ns)
		if err != nil {
			return
		}
		if errs := validation.IsDNS1123Subdomain(d); len(errs) > 0 {
			t.Errorf("inferred domain %q from %q: %v", d, data, errs)
		}
	})
}

// FuzzParse: a configuration that is accepted has valid names: the self
// FQDN and the domain are DNS names, the service and namespace labels, the
// hosts-file block id safe for a marker line.
func FuzzParse(f *testing.F) {
	f.Add("web", "ns1", "cluster.local", "web-0", "")
	f.Add("web", "ns1", " ", "web-0", "")
	f.Add("WEB", "NS1", "", "web-0", "web ")
	f.Add("zk", "default", "..", "zk-0", "a\nb")
	f.Fuzz(func(t *testing.T, service, ns, domain, hostname, hostsID string) {
		args := []string{"-on-start=/bin/true", "-service=" + service, "-ns=" + ns, "-hostname=" + hostname, "-hosts-file=/tmp/hosts", "-hosts-id=" + hostsID}
		if domain != "" {
			args = append(args, "-domain="+domain)
		}
		c, err := Parse(args, env(nil, kubeletResolv))
		if err != nil {
			return
		}
		if errs := validation.IsDNS1123Subdomain(c.Self()); len(errs) > 0 {
			t.Errorf("accepted %q: self %q: %v", args, c.Self(), errs)
		}
		if errs := validation.IsDNS1123Subdomain(c.Domain); len(errs) > 0 {
			t.Errorf("accepted %q: domain %q: %v", args, c.Domain, errs)
		}
		for _, l := range []string{c.Service, c.Namespace, c.Hostname} {
			if errs := validation.IsDNS1123Label(l); len(errs) > 0 {
				t.Errorf("accepted %q: label %q: %v", args, l, errs)
			}
		}
		if !validID(c.Sinks.HostsID) || strings.ContainsAny(c.Sinks.HostsID, " \t\r\n") {
			t.Errorf("accepted %q: hosts id %q", args, c.Sinks.HostsID)
		}
	})
}
