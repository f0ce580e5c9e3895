package apps

import (
	"strings"
	"testing"
)

func TestJudgeEtcd(t *testing.T) {
	pods := []string{"etcd-0", "etcd-1", "etcd-2"}
	ok := func(pod string, id uint64, members ...string) EtcdView {
		return EtcdView{Pod: pod, ClusterID: id, Members: members, Healthy: true}
	}
	all := []string{"etcd-0", "etcd-1", "etcd-2"}
	for _, tc := range []struct {
		name           string
		views          []EtcdView
		healthy, split bool
		detail         string
	}{
		{"one cluster", []EtcdView{ok("etcd-0", 7, all...), ok("etcd-1", 7, all...), ok("etcd-2", 7, all...)}, true, false, ""},
		{"two cluster ids", []EtcdView{ok("etcd-0", 7, all...), ok("etcd-1", 7, all...), ok("etcd-2", 9, "etcd-2")}, false, true, "2 cluster ids"},
		{"member missing", []EtcdView{ok("etcd-0", 7, "etcd-0", "etcd-1"), ok("etcd-1", 7, "etcd-0", "etcd-1"), {Pod: "etcd-2", Err: "connection refused"}}, false, false, "connection refused"},
		{"unstarted member", []EtcdView{ok("etcd-0", 7, "", "etcd-0", "etcd-1"), ok("etcd-1", 7, "", "etcd-0", "etcd-1"), ok("etcd-2", 7, "", "etcd-0", "etcd-1")}, false, false, "want"},
		{"extra member", []EtcdView{ok("etcd-0", 7, "etcd-0", "etcd-1", "etcd-2", "etcd-3"), ok("etcd-1", 7, all...), ok("etcd-2", 7, all...)}, false, false, "etcd-3"},
		{"unhealthy", []EtcdView{ok("etcd-0", 7, all...), ok("etcd-1", 7, all...), {Pod: "etcd-2", ClusterID: 7, Members: all, Err: "no leader"}}, false, false, "no leader"},
		{"a view missing", []EtcdView{ok("etcd-0", 7, all...), ok("etcd-1", 7, all...)}, false, false, "2 views of 3 pods"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := JudgeEtcd(tc.views, pods)
			if v.Healthy != tc.healthy || v.Split() != tc.split || !strings.Contains(v.Detail, tc.detail) {
				t.Errorf("JudgeEtcd = healthy %v split %v %q, want healthy %v split %v and %q", v.Healthy, v.Split(), v.Detail, tc.healthy, tc.split, tc.detail)
			}
		})
	}
}
