package peer

import (
	"fmt"
	"testing"
)

// The same member seen by two sources merges the same whatever the order
// of -source: before, every field but IPs, ports and the conditions came
// from the source listed first, so "-source=dns,pods" lost the pods
// source's ordinal, UID, node and labels, and "-source=pods,dns" kept them
// (issue 12 #3).
func TestNewSetMergeIndependentOfOrder(t *testing.T) {
	fromDNS := Peer{FQDN: "web-0.web.ns.svc.cluster.local", Name: "web-0", IPs: []string{"10.0.0.1"},
		Ready: true, Ordinal: -1, Ports: []Port{{Port: 80}}}
	fromPods := Peer{FQDN: "web-0.web.ns.svc.cluster.local", Name: "web-0", IPs: []string{"10.0.0.1"},
		Ready: true, Serving: true, Pod: "web-0", UID: "u0", Node: "n1", Ordinal: 0,
		Labels: map[string]string{"app": "web"}, Ports: []Port{{Name: "http", Port: 80, Protocol: "TCP"}}}
	fromSlices := Peer{FQDN: "web-0.web.ns.svc.cluster.local", Name: "web-0", IPs: []string{"fd00::1"},
		Ready: false, Terminating: true, Pod: "web-0", UID: "u0", Node: "n1", Zone: "z1", Ordinal: 0}
	orders := [][]Peer{
		{fromDNS, fromPods, fromSlices}, {fromDNS, fromSlices, fromPods}, {fromPods, fromDNS, fromSlices},
		{fromPods, fromSlices, fromDNS}, {fromSlices, fromDNS, fromPods}, {fromSlices, fromPods, fromDNS},
	}
	first, _ := NewSet(orders[0]...).Get(fromDNS.FQDN)
	for _, o := range orders[1:] {
		got, _ := NewSet(o...).Get(fromDNS.FQDN)
		if !got.Equal(first) {
			t.Errorf("merge depends on the order:\n%+v\n%+v", first, got)
		}
	}
	if first.Ordinal != 0 || first.UID != "u0" || first.Node != "n1" || first.Zone != "z1" || first.Labels["app"] != "web" {
		t.Errorf("merged %+v: want the ordinal, UID, node, zone and labels a source knows", first)
	}
	if !first.Ready || first.Terminating {
		t.Errorf("merged Ready %v Terminating %v: want ready, not terminating (one source sees it ready and live)", first.Ready, first.Terminating)
	}
	// Conflicting values (two sources disagree) still give one answer.
	a, b := Peer{FQDN: "x", Node: "n1", Ordinal: 1, Labels: map[string]string{"k": "1"}},
		Peer{FQDN: "x", Node: "n2", Ordinal: 2, Labels: map[string]string{"k": "2", "j": "3"}}
	ab, _ := NewSet(a, b).Get("x")
	ba, _ := NewSet(b, a).Get("x")
	if !ab.Equal(ba) {
		t.Errorf("conflicting values merge by order: %+v vs %+v", ab, ba)
	}
	if s := fmt.Sprint(ab.Labels); s != "map[j:3 k:1]" {
		t.Errorf("labels %s, want the union with the smaller value on a conflict", s)
	}
}

func TestFQDN(t *testing.T) {
	if got := FQDN("Web-0", "web", "db", "cluster.local."); got != "web-0.web.db.svc.cluster.local" {
		t.Errorf("FQDN = %q", got)
	}
	if got := FQDN("", "web", "db", "cluster.local"); got != "web.db.svc.cluster.local" {
		t.Errorf("service FQDN = %q", got)
	}
}
