package dns

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"golang.org/x/net/dns/dnsmessage"
	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzParse: whatever a server answers, only valid in-domain names come out:
// each peer is one RFC 1123 label directly below the service name; and no
// response is accepted as an answer (see answers) unless it has QR set and
// echoes exactly the question, with answer records of its class only, as
// another parser (x/net's dnsmessage) reads it.
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
		for _, forge := range []func(*dns.Msg){
			func(m *dns.Msg) {}, // a query (QR clear)
			func(m *dns.Msg) { m.Response = true },
			func(m *dns.Msg) { m.Response = true; m.Question[0].Name = "WEB." + svc + "." },
			func(m *dns.Msg) {
				m.Response = true
				m.Rcode = dns.RcodeNameError
				m.Answer = nil
				m.Question[0].Name = "db." + svc + "."
			},
		} {
			c := m.Copy()
			forge(c)
			b, err := c.Pack()
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	src, err := New(Config{Name: svc, Servers: []string{"127.0.0.1:53"}})
	if err != nil {
		f.Fatal(err)
	}
	question := dns.Question{Name: svc + ".", Qtype: dns.TypeSRV, Qclass: dns.ClassINET}
	f.Fuzz(func(t *testing.T, wire []byte) {
		if len(wire) >= 12 && answers(wire, question) == nil {
			if err := answersPerDNSMessage(wire); err != nil {
				t.Fatalf("accepted as an answer, but %v", err)
			}
		}
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

// answersPerDNSMessage checks with x/net's parser that wire is a response
// to the SRV IN question for svc with IN answer records only.
func answersPerDNSMessage(wire []byte) error {
	var p dnsmessage.Parser
	h, err := p.Start(wire)
	if err != nil {
		return err
	}
	if !h.Response {
		return errors.New("QR not set")
	}
	qs, err := p.AllQuestions()
	if err != nil {
		return err
	}
	if len(qs) != 1 || !strings.EqualFold(qs[0].Name.String(), svc+".") || qs[0].Type != dnsmessage.TypeSRV || qs[0].Class != dnsmessage.ClassINET {
		return fmt.Errorf("questions %v", qs)
	}
	for {
		rh, err := p.AnswerHeader()
		if errors.Is(err, dnsmessage.ErrSectionDone) {
			return nil
		}
		if err != nil {
			return err
		}
		if rh.Class != dnsmessage.ClassINET {
			return fmt.Errorf("answer record of class %v", rh.Class)
		}
		if err := p.SkipAnswer(); err != nil {
			return err
		}
	}
}
