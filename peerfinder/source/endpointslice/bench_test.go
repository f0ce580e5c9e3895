package endpointslice

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flockd/flock/peerfinder/peer"
)

// BenchmarkPeers5000 converts 50 slices of 100 endpoints (the EndpointSlice
// controller's default slice size) into the peer set of a 5,000-member service.
func BenchmarkPeers5000(b *testing.B) {
	var slices []*Slice
	for s := range 50 {
		sl := &Slice{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", s)}, Ports: []peer.Port{{Name: "peer", Port: 2888, Protocol: "TCP"}}}
		for e := range 100 {
			i := s*100 + e
			sl.Endpoints = append(sl.Endpoints, Endpoint{
				Addresses: []string{fmt.Sprintf("10.%d.%d.%d", i>>16&0xff, i>>8&0xff, i&0xff)},
				Hostname:  fmt.Sprintf("web-%d", i), Ready: true, Serving: true,
				Node: fmt.Sprintf("node-%d", i%100), Zone: "zone-a", Pod: fmt.Sprintf("web-%d", i), UID: fmt.Sprintf("uid-%d", i),
			})
		}
		slices = append(slices, sl)
	}
	o := Options{Service: "web", Namespace: "ns", Domain: "cluster.local"}
	b.ReportAllocs()
	for b.Loop() {
		if n := len(Peers(slices, o)); n != 5000 {
			b.Fatalf("%d peers", n)
		}
	}
}
