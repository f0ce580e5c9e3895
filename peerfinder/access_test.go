package peerfinder

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/flockd/flock/peerfinder/config"
	"github.com/flockd/flock/peerfinder/membership"
)

func TestRequiredAccess(t *testing.T) {
	tests := []struct {
		name  string
		kube  config.Kube
		boot  config.Bootstrap
		sinks config.Sinks
		want  []string
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
		{name: "cluster lease reads pods and claims for the members' data", boot: config.Bootstrap{ClusterLease: "db-cluster", PodUID: "u"},
			want: []string{"get persistentvolumeclaims", "get pods", "create leases.coordination.k8s.io", "get leases.coordination.k8s.io/db-cluster", "update leases.coordination.k8s.io/db-cluster"}},
		{name: "hosts-file writer Lease", sinks: config.Sinks{HostsFile: "/shared/hosts", HostsLease: "train-hosts"},
			want: []string{"create leases.coordination.k8s.io", "get leases.coordination.k8s.io/train-hosts", "update leases.coordination.k8s.io/train-hosts"}},
		{name: "hosts-expect auto reads its pod and lists the Jobs", kube: config.Kube{Sources: []string{"pods"}, Selector: "app=train"},
			sinks: config.Sinks{HostsFile: "/etc/hosts", ExpectAuto: true},
			want:  []string{"get pods", "list pods", "watch pods", "list jobs.batch"}},
		{name: "get pods is listed once for every flag needing it",
			kube: config.Kube{Sources: []string{"endpointslice", "pods"}, SelectorFromSelf: []string{"app"}},
			boot: config.Bootstrap{ExpectAuto: true},
			want: []string{"get pods", "list pods", "watch pods", "list statefulsets.apps", "watch statefulsets.apps", "list endpointslices.discovery.k8s.io", "watch endpointslices.discovery.k8s.io"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := requiredAccess(&config.Config{Kube: tt.kube, Bootstrap: tt.boot, Sinks: tt.sinks})
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
		{name: "no DNS records: maybe the wrong domain", reason: membership.WaitEmpty, f: facts{service: publishing, dnsSilent: true},
			want: []string{"the Service exists, but DNS has no records", "pass the right -domain", "from /etc/resolv.conf"}},
		{name: "DNS lookup failed: maybe the wrong domain", reason: membership.WaitSources, f: facts{dnsSilent: true},
			want: []string{"DNS has no records for db.ns.svc.cluster.local", "-domain"}},
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

// rbacExamples maps each file of examples/rbac to the command line it is
// for. The RBAC in each must be exactly requiredAccess of that command line:
// enough, and nothing more. test/bootstrap checks the same files against a
// real API server.
var rbacExamples = map[string]config.Config{
	"endpointslice.yaml":           {Kube: config.Kube{Sources: []string{"endpointslice"}}},
	"pods.yaml":                    {Kube: config.Kube{Sources: []string{"pods"}, Selector: "app=db"}},
	"pods-selector-from-self.yaml": {Kube: config.Kube{Sources: []string{"pods"}, SelectorFromSelf: []string{"app"}}},
	"expect-auto.yaml":             {Kube: config.Kube{Sources: []string{"dns"}}, Bootstrap: config.Bootstrap{ExpectAuto: true}},
	"cluster-lease.yaml":           {Kube: config.Kube{Sources: []string{"dns"}}, Bootstrap: config.Bootstrap{ClusterLease: "db-cluster", PodUID: "from-downward-api"}},
	"serviceaccount.yaml":          {Kube: config.Kube{Sources: []string{"dns"}}},
	"hosts-lease.yaml":             {Kube: config.Kube{Sources: []string{"dns"}}, Sinks: config.Sinks{HostsFile: "/shared/hosts", HostsLease: "hosts-writer"}},
	"events.yaml":                  {Kube: config.Kube{Sources: []string{"dns"}, Events: config.EventsOn}},
	"hosts-expect-auto.yaml":       {Kube: config.Kube{Sources: []string{"dns"}}, Sinks: config.Sinks{HostsFile: "/etc/hosts", ExpectAuto: true}},
}

func TestRBACExamplesGrantExactlyWhatIsRequired(t *testing.T) {
	files, err := filepath.Glob("../examples/rbac/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, path := range files {
		name := filepath.Base(path)
		cfg, ok := rbacExamples[name]
		if !ok {
			t.Errorf("%s: no command line known for it; add it to rbacExamples", name)
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var granted []string
		var roles, bindings, accounts int
		for _, doc := range strings.Split(string(data), "\n---\n") {
			var meta metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			switch meta.Kind {
			case "Role":
				roles++
				var r rbacv1.Role
				if err := yaml.UnmarshalStrict([]byte(doc), &r); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				for _, rule := range r.Rules {
					names := rule.ResourceNames
					if len(names) == 0 {
						names = []string{""}
					}
					for _, g := range rule.APIGroups {
						for _, res := range rule.Resources {
							for _, n := range names {
								for _, v := range rule.Verbs {
									granted = append(granted, access{Verb: v, Group: g, Resource: res, Name: n}.String())
								}
							}
						}
					}
				}
			case "RoleBinding":
				bindings++
				var b rbacv1.RoleBinding
				if err := yaml.UnmarshalStrict([]byte(doc), &b); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if len(b.Subjects) != 1 || b.Subjects[0].Kind != "ServiceAccount" || b.Subjects[0].Name != "peer-finder" {
					t.Errorf("%s: binding subjects %+v, want the peer-finder ServiceAccount", name, b.Subjects)
				}
			case "ServiceAccount":
				accounts++
			default:
				t.Errorf("%s: unexpected kind %q", name, meta.Kind)
			}
		}
		if name != "serviceaccount.yaml" && (roles != 1 || bindings != 1) {
			t.Errorf("%s: %d Roles and %d RoleBindings, want one each", name, roles, bindings)
		}
		var want []string
		for _, a := range slices.Concat(requiredAccess(&cfg), optionalAccess(&cfg)) {
			want = append(want, a.String())
		}
		slices.Sort(granted)
		slices.Sort(want)
		if !slices.Equal(granted, want) {
			t.Errorf("%s grants %q, want exactly %q", name, granted, want)
		}
	}
}

var updateComponents = flag.Bool("update-components", false, "rewrite config/peer-finder from examples/rbac")

// TestKustomizeComponentsMatchExamples: config/peer-finder has one
// kustomize component per examples/rbac file, holding that file unchanged
// (so it grants exactly what TestRBACExamplesGrantExactlyWhatIsRequired
// checks). -update-components rewrites them.
func TestKustomizeComponentsMatchExamples(t *testing.T) {
	files, err := filepath.Glob("../examples/rbac/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	want := map[string]bool{}
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".yaml")
		want[name] = true
		example, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join("../config/peer-finder", name)
		kustomization := "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources:\n  - " + name + ".yaml\n"
		if *updateComponents {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for f, data := range map[string][]byte{name + ".yaml": example, "kustomization.yaml": []byte(kustomization)} {
				if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		got, err := os.ReadFile(filepath.Join(dir, name+".yaml"))
		if err != nil || string(got) != string(example) {
			t.Errorf("%s/%s.yaml differs from examples/rbac/%s.yaml (%v); run: go test ./peerfinder -run TestKustomizeComponentsMatchExamples -update-components", dir, name, name, err)
		}
		if k, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml")); err != nil || string(k) != kustomization {
			t.Errorf("%s/kustomization.yaml is not the component of %s.yaml (%v)", dir, name, err)
		}
	}
	dirs, err := os.ReadDir("../config/peer-finder")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if d.IsDir() && !want[d.Name()] {
			t.Errorf("config/peer-finder/%s has no examples/rbac/%s.yaml", d.Name(), d.Name())
		}
	}
}
