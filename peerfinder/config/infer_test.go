package config

import (
	"strings"
	"testing"
)

// TestInferDomainFromNamespaceEntryAnywhere: the <ns>.svc.<domain> entry
// decides wherever it stands in the search list, also when a "svc.<domain>"
// entry of another domain comes before it (so the fallback would give a
// wrong answer), and the reason names that entry.
func TestInferDomainFromNamespaceEntryAnywhere(t *testing.T) {
	for _, tt := range []struct {
		name, search string
	}{
		{"first", "ns1.svc.right.example svc.wrong.example wrong.example"},
		{"second, after another domain's svc entry", "svc.wrong.example ns1.svc.right.example"},
		{"middle", "corp.example svc.wrong.example ns1.svc.right.example svc.right.example right.example"},
		{"last", "ec2.internal other.svc.wrong.example svc.wrong.example wrong.example ns1.svc.right.example"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rc, err := ParseResolvConf([]byte("nameserver 10.0.0.10\nsearch " + tt.search + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			got, why, err := InferDomain(rc, "ns1")
			if err != nil || got != "right.example" {
				t.Fatalf("InferDomain(search %s) = %q, %v; want right.example", tt.search, got, err)
			}
			if !strings.Contains(why, `"ns1.svc.right.example"`) || strings.Contains(why, "no entry for namespace") {
				t.Errorf("reason %q does not name the namespace's entry", why)
			}
		})
	}
}
