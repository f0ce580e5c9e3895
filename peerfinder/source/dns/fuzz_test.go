package dns

import (
	"strings"
	"testing"

	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzParse: whatever a server answers, only valid in-domain names come out:
// each peer is one RFC 1123 label directly below the service name.
func FuzzParse(f *testing.F) {
	for _, targets := range [][]string{
		{"web-0." + svc + ".", "web-1." + svc + "."},
		{"-lead." + svc + ".", "localhost.", "a.b." + svc + ".", "WEB-2." + strings.ToUpper(svc) + "."},
		{"x\\000y." + svc + ".", "."},
	} {
		m := new(dns.Msg)
		m.SetQuestion(svc+".", dns.TypeSRV)
		for _, tg := range targets {
			m.Answer = append(m.Answer, &dns.SRV{Hdr: dns.RR_Header{Name: svc + ".", Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: 30}, Port: 80, Target: tg})
			m.Extra = append(m.Extra, &dns.A{Hdr: dns.RR_Header{Name: tg, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30}, A: []byte{10, 0, 0, 1}})
		}
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	src, err := New(Config{Name: svc, Servers: []string{"127.0.0.1:53"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, wire []byte) {
		resp := new(dns.Msg)
		if resp.Unpack(wire) != nil {
			return
		}
		set, _ := src.parse(resp)
		for _, p := range set.Peers() {
			label, rest, ok := strings.Cut(p.FQDN, ".")
			if !ok || rest != svc {
				t.Fatalf("peer %q is not directly below %s", p.FQDN, svc)
			}
			if errs := validation.IsDNS1123Label(label); len(errs) > 0 || p.Name != label {
				t.Fatalf("peer %q (name %q): %v", p.FQDN, p.Name, errs)
			}
		}
	})
}
