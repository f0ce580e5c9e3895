package hostsfile

import (
	"fmt"
	"testing"

	"github.com/flockd/flock/peerfinder/peer"
)

// BenchmarkRender5000 plans and renders the managed block of a 5,000-peer
// set into a kubelet-style /etc/hosts.
func BenchmarkRender5000(b *testing.B) {
	ps := make([]peer.Peer, 5000)
	for i := range ps {
		ps[i] = peer.Peer{FQDN: fmt.Sprintf("web-%d.web.ns.svc.cluster.local", i), Name: fmt.Sprintf("web-%d", i),
			IPs: []string{fmt.Sprintf("10.%d.%d.%d", i>>16&0xff, i>>8&0xff, i&0xff)}, Ready: true, Ordinal: i}
	}
	set := peer.NewSet(ps...)
	namer, err := NewNamer("", nil, "")
	if err != nil {
		b.Fatal(err)
	}
	current := []byte("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n10.244.0.5\tweb-0.web.ns.svc.cluster.local\tweb-0\n")
	b.ReportAllocs()
	for b.Loop() {
		plan := MakePlan(set, namer, 0, nil)
		if len(plan.Entries) != 5000 {
			b.Fatalf("%d entries", len(plan.Entries))
		}
		if _, err := Render(current, "web", Block("web", plan)); err != nil {
			b.Fatal(err)
		}
	}
}
