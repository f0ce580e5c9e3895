package peerfinder

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/flockd/flock/internal/config"
	"github.com/flockd/flock/membership"
)

func TestRequiredAccess(t *testing.T) {
	tests := []struct {
		name string
		kube config.Kube
		boot config.Bootstrap
		want []string
	}{
		{name: "dns only needs nothing", kube: config.Kube{Sources: []string{"dns"}}},
		{name: "endpointslice", kube: config.Kube{Sources: []string{"endpointslice"}},
			want: []string{"list endpointslices.discovery.k8s.io", "watch endpointslices.discovery.k8s.io"}},
		{name: "pods by selector", kube: config.Kube{Sources: []string{"pods"}, Selector: "app=db"},
			want: []string{"list pods", "watch pods"}},
		{name: "pods from self", kube: config.Kube{Sources: []string{"pods"}, SelectorFromSelf: []string{"app"}},
			want: []string{"get pods", "list pods", "watch pods"}},
		{name: "expect auto", kube: config.Kube{Sources: []string{"dns"}}, boot: config.Bootstrap{ExpectAuto: true},
			want: []string{"get pods", "list statefulsets.apps", "watch statefulsets.apps"}},
		{name: "cluster lease with POD_UID", boot: config.Bootstrap{ClusterLease: "db-cluster", PodUID: "u"},
			want: []string{"create leases.coordination.k8s.io", "get leases.coordination.k8s.io/db-cluster", "update leases.coordination.k8s.io/db-cluster"}},
		{name: "cluster lease without POD_UID reads its pod", boot: config.Bootstrap{ClusterLease: "db-cluster"},
			want: []string{"get pods", "create leases.coordination.k8s.io", "get leases.coordination.k8s.io/db-cluster", "update leases.coordination.k8s.io/db-cluster"}},
		{name: "get pods is listed once for every flag needing it",
			kube: config.Kube{Sources: []string{"endpointslice", "pods"}, SelectorFromSelf: []string{"app"}},
			boot: config.Bootstrap{ExpectAuto: true},
			want: []string{"get pods", "list pods", "watch pods", "list statefulsets.apps", "watch statefulsets.apps", "list endpointslices.discovery.k8s.io", "watch endpointslices.discovery.k8s.io"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := requiredAccess(&config.Config{Kube: tt.kube, Bootstrap: tt.boot})
			var strs []string
			for _, a := range got {
				strs = append(strs, a.String())
				if len(a.For) == 0 {
					t.Errorf("%s: no flag named as needing it", a)
				}
			}
			if !slices.Equal(strs, tt.want) {
				t.Errorf("requiredAccess() = %q, want %q", strs, tt.want)
			}
		})
	}
	got := requiredAccess(&config.Config{Kube: config.Kube{Sources: []string{"pods"}, SelectorFromSelf: []string{"app"}}, Bootstrap: config.Bootstrap{ExpectAuto: true}})
	if i := slices.IndexFunc(got, func(a access) bool { return a.String() == "get pods" }); i < 0 || len(got[i].For) != 2 {
		t.Errorf("get pods For = %v, want both flags", got)
	}
}

func TestAdvice(t *testing.T) {
	cfg := &config.Config{Service: "db", Namespace: "ns", Domain: "cluster.local", DomainSource: "/etc/resolv.conf search entry ns.svc.cluster.local", Hostname: "db-0",
		Kube: config.Kube{Sources: []string{"dns"}}}
	headless := &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone}}
	publishing := headless.DeepCopy()
	publishing.Spec.PublishNotReadyAddresses = true
	clusterIP := &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.1", PublishNotReadyAddresses: true}}
	tests := []struct {
		name   string
		reason membership.Reason
		f      facts
		want   []string // substrings, each in some hint
		reject []string // substrings in no hint
	}{
		{name: "self missing, service hides not-ready members", reason: membership.WaitSelf,
			f:    facts{service: headless},
			want: []string{"publishNotReadyAddresses: true", "-include-not-ready", "-hostname"}},
		{name: "self missing, service publishes not-ready: no publishNotReadyAddresses hint", reason: membership.WaitSelf,
			f:      facts{service: publishing},
			want:   []string{"-hostname"},
			reject: []string{"publishNotReadyAddresses"}},
		{name: "service not headless", reason: membership.WaitEmpty, f: facts{service: clusterIP},
			want: []string{"not headless"}},
		{name: "no DNS records: maybe the wrong domain", reason: membership.WaitEmpty, f: facts{service: publishing, dnsEmpty: true},
			want: []string{"pass -domain", "inferred from /etc/resolv.conf"}},
		{name: "service missing", reason: membership.WaitEmpty, f: facts{serviceMissing: true},
			want: []string{"does not exist"}, reject: []string{"publishNotReadyAddresses"}},
		{name: "rbac missing names the permission", reason: membership.WaitSources,
			f:    facts{missing: []access{{Verb: "list", Group: "discovery.k8s.io", Resource: "endpointslices"}}},
			want: []string{"list endpointslices.discovery.k8s.io", "examples/rbac"}},
		{name: "expected size unknown", reason: membership.WaitExpect, want: []string{"list statefulsets"}},
		{name: "too few", reason: membership.WaitSize, f: facts{service: headless}, want: []string{"-expect", "publishNotReadyAddresses"}},
		{name: "publish: no advice", reason: membership.Publish, f: facts{service: publishing}, reject: []string{" "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.f.cfg = cfg
			got := strings.Join(advice(tt.reason, tt.f), "\n")
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("advice lacks %q:\n%s", w, got)
				}
			}
			for _, r := range tt.reject {
				if strings.Contains(got, r) {
					t.Errorf("advice has %q:\n%s", r, got)
				}
			}
		})
	}
}
