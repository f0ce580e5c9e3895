package controller

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	flockv1 "github.com/flockd/flock/api/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func testFlock(mods ...func(*flockv1.Flock)) *flockv1.Flock {
	f := &flockv1.Flock{
		ObjectMeta: metav1.ObjectMeta{Name: "zk", Namespace: "db", UID: "uid-1", Generation: 3},
		Spec: flockv1.FlockSpec{
			Replicas: ptr.To[int32](3),
			Ports:    []corev1.ServicePort{{Name: "client", Port: 2181}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "zk"}},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
					Containers: []corev1.Container{{
						Name: "zk", Image: "zookeeper:3.9",
						VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
					}},
				},
			},
			NodeSelector: map[string]string{"pool": "db"},
			Tolerations:  []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}},
		},
	}
	for _, m := range mods {
		m(f)
	}
	return f
}

func TestDesiredGolden(t *testing.T) {
	tests := []struct {
		name string
		in   DesiredInput
	}{
		{name: "node-pinned", in: DesiredInput{
			Flock: testFlock(func(f *flockv1.Flock) {
				f.Spec.Storage.Local = &flockv1.LocalStorage{Path: "/mnt/disks", Size: ptr.To(resource.MustParse("5Gi")), Volumes: []string{"data", "logs"}, Source: flockv1.LocalVolumeLocal}
			}),
			Mode:      flockv1.ModeNodePinned,
			Assign:    map[int32]string{0: "n1", 1: "n3", 2: "n2", 3: "n4"}, // 3 is inactive: no volume
			Hostnames: map[string]string{"n1": "host-1", "n2": "host-2", "n3": "host-3"},
		}},
		{name: "network-storage", in: DesiredInput{
			Flock: testFlock(func(f *flockv1.Flock) {
				f.Spec.ServiceName = "zk-hs"
				f.Spec.Storage.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{
					ObjectMeta: metav1.ObjectMeta{Name: "data"},
					Spec: corev1.PersistentVolumeClaimSpec{
						AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
						Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
					},
				}}
			}),
			Mode: flockv1.ModeNetworkStorage,
		}},
		// The template's own spreading is kept as is: no defaults added.
		{name: "network-storage-own-spread", in: DesiredInput{
			Flock: testFlock(func(f *flockv1.Flock) {
				f.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
						LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "zk"}},
						TopologyKey:   "kubernetes.io/hostname",
					}},
				}}
			}),
			Mode: flockv1.ModeNetworkStorage,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := Desired(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			for _, o := range objs {
				b, err := yaml.Marshal(o)
				if err != nil {
					t.Fatal(err)
				}
				got.WriteString("---\n")
				got.Write(b)
			}
			path := filepath.Join("testdata", tt.name+".golden.yaml")
			if *update {
				if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read golden file (run with -update to create): %v", err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("Desired differs from %s (run go test -update and review the diff):\n%s", path, got.String())
			}
		})
	}
}

// TestDesiredInvariants checks the properties the golden files show, so a
// careless -update cannot bless a broken design.
func TestDesiredInvariants(t *testing.T) {
	f := testFlock()
	objs, err := Desired(DesiredInput{Flock: f, Mode: flockv1.ModeNodePinned, Assign: map[int32]string{0: "n1", 1: "n2", 2: "n3", 5: "n9"}})
	if err != nil {
		t.Fatal(err)
	}
	svc, ok := objs[0].(*corev1.Service)
	if !ok || svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses || svc.Name != "zk" {
		t.Errorf("service = %+v, want headless zk publishing not-ready addresses", objs[0])
	}
	sts, ok := objs[1].(*appsv1.StatefulSet)
	if !ok {
		t.Fatalf("objs[1] = %T, want StatefulSet", objs[1])
	}
	if sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement || sts.Spec.ServiceName != "zk" || *sts.Spec.Replicas != 3 {
		t.Errorf("statefulset spec = %+v", sts.Spec)
	}
	if p := sts.Spec.PersistentVolumeClaimRetentionPolicy; p.WhenScaled != appsv1.RetainPersistentVolumeClaimRetentionPolicyType || p.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
		t.Errorf("claim retention = %+v, want Retain/Retain", p)
	}
	if got := sts.Spec.Template.Labels[flockv1.FlockLabel]; got != "zk" {
		t.Errorf("template label %s = %q", flockv1.FlockLabel, got)
	}
	if sts.Spec.Template.Spec.NodeSelector["pool"] != "db" || sts.Spec.Template.Spec.NodeSelector["kubernetes.io/os"] != "linux" {
		t.Errorf("node selector = %v, want the template's and the Flock's", sts.Spec.Template.Spec.NodeSelector)
	}
	if len(f.Spec.Template.Spec.NodeSelector) != 1 || len(f.Spec.Template.Labels) != 1 {
		t.Errorf("Desired changed the Flock's template: %+v", f.Spec.Template)
	}
	vct := sts.Spec.VolumeClaimTemplates
	if len(vct) != 1 || vct[0].Name != "data" || vct[0].Spec.StorageClassName == nil || *vct[0].Spec.StorageClassName != "" {
		t.Fatalf("claim templates = %+v, want one class-less 'data'", vct)
	}
	for _, o := range objs[:2] {
		if refs := o.GetOwnerReferences(); len(refs) != 1 || refs[0].UID != "uid-1" || !*refs[0].Controller {
			t.Errorf("%T owner refs = %+v", o, refs)
		}
	}
	if len(objs) != 5 {
		t.Fatalf("got %d objects, want service, statefulset and 3 volumes (member 5 is inactive)", len(objs))
	}
	for i, o := range objs[2:] {
		pv := o.(*corev1.PersistentVolume)
		ord := int32(i)
		want := []string{"n1", "n2", "n3"}[i]
		if len(pv.OwnerReferences) != 0 || pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
			t.Errorf("pv %s: owners %v, reclaim %s: data must outlive the Flock", pv.Name, pv.OwnerReferences, pv.Spec.PersistentVolumeReclaimPolicy)
		}
		if cr := pv.Spec.ClaimRef; cr == nil || cr.Name != ClaimName(f, "data", ord) || cr.Namespace != "db" {
			t.Errorf("pv %s claimRef = %+v, want db/%s", pv.Name, cr, ClaimName(f, "data", ord))
		}
		if got := pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Values; len(got) != 1 || got[0] != want {
			t.Errorf("pv %s node affinity = %v, want [%s]", pv.Name, got, want)
		}
		if pv.Name != VolumeName(f, "data", ord, want) || pv.Annotations[nodeAnnotation] != want {
			t.Errorf("pv name %s / node annotation %q", pv.Name, pv.Annotations[nodeAnnotation])
		}
		if hp := pv.Spec.HostPath; hp == nil || hp.Path != "/var/lib/flock/db/zk/data-"+string(rune('0'+i)) || *hp.Type != corev1.HostPathDirectoryOrCreate {
			t.Errorf("pv %s hostPath = %+v", pv.Name, hp)
		}
	}
	if VolumeName(f, "data", 0, "n1") == VolumeName(f, "data", 0, "n2") {
		t.Error("volume names must differ per node, so a moved member gets a new volume")
	}
}

// TestDesiredSpread checks the default spreading of NetworkStorage members:
// added only when the template has no spreading of its own, never in
// NodePinned mode (the volumes place the members there), and never at the
// cost of the template's other affinity.
func TestDesiredSpread(t *testing.T) {
	nodeAff := &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "disk", Operator: corev1.NodeSelectorOpIn, Values: []string{"ssd"}}}}},
	}}
	ownTSC := []corev1.TopologySpreadConstraint{{MaxSkew: 2, TopologyKey: "rack", WhenUnsatisfiable: corev1.DoNotSchedule}}
	tests := []struct {
		name       string
		mode       flockv1.Mode
		affinity   *corev1.Affinity
		tsc        []corev1.TopologySpreadConstraint
		wantSpread bool
	}{
		{name: "network storage, no affinity", mode: flockv1.ModeNetworkStorage, wantSpread: true},
		{name: "network storage, node affinity only", mode: flockv1.ModeNetworkStorage, affinity: &corev1.Affinity{NodeAffinity: nodeAff}, wantSpread: true},
		{name: "network storage, own topology spread", mode: flockv1.ModeNetworkStorage, tsc: ownTSC},
		{name: "network storage, own anti-affinity", mode: flockv1.ModeNetworkStorage, affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{}}},
		{name: "node pinned", mode: flockv1.ModeNodePinned},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := testFlock(func(f *flockv1.Flock) {
				f.Spec.Template.Spec.Affinity = tt.affinity.DeepCopy()
				f.Spec.Template.Spec.TopologySpreadConstraints = tt.tsc
			})
			objs, err := Desired(DesiredInput{Flock: f, Mode: tt.mode, Assign: map[int32]string{0: "n1"}})
			if err != nil {
				t.Fatal(err)
			}
			ps := objs[1].(*appsv1.StatefulSet).Spec.Template.Spec
			if !tt.wantSpread {
				if !equality.Semantic.DeepEqual(ps.Affinity, tt.affinity) || !equality.Semantic.DeepEqual(ps.TopologySpreadConstraints, tt.tsc) {
					t.Errorf("affinity %+v, spread %+v: want the template's unchanged", ps.Affinity, ps.TopologySpreadConstraints)
				}
				return
			}
			sel := map[string]string{flockv1.FlockLabel: "zk"}
			if ps.Affinity == nil || ps.Affinity.PodAntiAffinity == nil {
				t.Fatalf("affinity %+v: want a pod anti-affinity", ps.Affinity)
			}
			pa := ps.Affinity.PodAntiAffinity
			if len(pa.RequiredDuringSchedulingIgnoredDuringExecution) != 0 || len(pa.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
				t.Fatalf("pod anti-affinity %+v: want exactly one preferred term", pa)
			}
			term := pa.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
			if term.TopologyKey != "kubernetes.io/hostname" || !equality.Semantic.DeepEqual(term.LabelSelector.MatchLabels, sel) {
				t.Errorf("anti-affinity term %+v: want the Flock's pods per hostname", term)
			}
			if tsc := ps.TopologySpreadConstraints; len(tsc) != 1 || tsc[0].TopologyKey != "topology.kubernetes.io/zone" ||
				tsc[0].WhenUnsatisfiable != corev1.ScheduleAnyway || !equality.Semantic.DeepEqual(tsc[0].LabelSelector.MatchLabels, sel) {
				t.Errorf("topology spread %+v: want one ScheduleAnyway zone spread of the Flock's pods", tsc)
			}
			var wantNode *corev1.NodeAffinity
			if tt.affinity != nil {
				wantNode = tt.affinity.NodeAffinity
			}
			if !equality.Semantic.DeepEqual(ps.Affinity.NodeAffinity, wantNode) {
				t.Errorf("node affinity %+v: want the template's", ps.Affinity.NodeAffinity)
			}
			if !equality.Semantic.DeepEqual(f.Spec.Template.Spec.Affinity, tt.affinity) || f.Spec.Template.Spec.TopologySpreadConstraints != nil {
				t.Errorf("Desired changed the Flock's template: %+v", f.Spec.Template.Spec)
			}
		})
	}
}

func TestDesiredRejectsAuto(t *testing.T) {
	if _, err := Desired(DesiredInput{Flock: testFlock(), Mode: flockv1.ModeAuto}); err == nil {
		t.Error("Desired with unresolved Auto mode: want an error")
	}
}

// TestExamples checks that the example manifests are valid Flocks (strict
// decoding: no unknown fields) that Desired can materialize.
func TestExamples(t *testing.T) {
	paths, _ := filepath.Glob("../examples/flock/*.yaml")
	samples, _ := filepath.Glob("../config/samples/flock_*.yaml")
	paths = append(paths, samples...)
	if len(paths) < 3 {
		t.Fatalf("found %d example manifests, want at least 3", len(paths))
	}
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			raw, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			var f flockv1.Flock
			if err := yaml.UnmarshalStrict(raw, &f); err != nil {
				t.Fatalf("decode: %v", err)
			}
			f.Namespace = "default"
			mode := f.Spec.Mode
			if mode == flockv1.ModeAuto || mode == "" {
				mode = flockv1.ModeNodePinned
			}
			objs, err := Desired(DesiredInput{Flock: &f, Mode: mode, Assign: map[int32]string{0: "n0"}})
			if err != nil || len(objs) < 2 {
				t.Fatalf("Desired: %d objects, %v", len(objs), err)
			}
		})
	}
}

// TestDesiredStatefulSetControls: the Flock's podManagementPolicy,
// updateStrategy and podDisruptionBudget reach the StatefulSet and the
// budget; unset, they are Parallel, RollingUpdate and no budget; claims
// are always retained.
func TestDesiredStatefulSetControls(t *testing.T) {
	one := intstr.FromInt32(1)
	two := intstr.FromInt32(2)
	half := intstr.FromString("50%")
	tests := []struct {
		name     string
		mod      func(*flockv1.Flock)
		policy   appsv1.PodManagementPolicyType
		strategy appsv1.StatefulSetUpdateStrategy
		budget   *policyv1.PodDisruptionBudgetSpec
	}{
		{name: "defaults", mod: func(*flockv1.Flock) {},
			policy: appsv1.ParallelPodManagement, strategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}},
		{name: "ordered, partitioned, min available", mod: func(f *flockv1.Flock) {
			f.Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
			f.Spec.UpdateStrategy = flockv1.UpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType, RollingUpdate: &flockv1.RollingUpdate{Partition: ptr.To[int32](2)}}
			f.Spec.PodDisruptionBudget = &flockv1.PodDisruptionBudget{MinAvailable: &two}
		}, policy: appsv1.OrderedReadyPodManagement,
			strategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType, RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](2)}},
			budget:   &policyv1.PodDisruptionBudgetSpec{MinAvailable: &two}},
		{name: "on delete, empty budget", mod: func(f *flockv1.Flock) {
			f.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
			f.Spec.UpdateStrategy = flockv1.UpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
			f.Spec.PodDisruptionBudget = &flockv1.PodDisruptionBudget{}
		}, policy: appsv1.ParallelPodManagement, strategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			budget: &policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one}},
		{name: "max unavailable percentage", mod: func(f *flockv1.Flock) {
			f.Spec.PodDisruptionBudget = &flockv1.PodDisruptionBudget{MaxUnavailable: &half}
		}, policy: appsv1.ParallelPodManagement, strategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType},
			budget: &policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &half}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, mode := range []flockv1.Mode{flockv1.ModeNetworkStorage, flockv1.ModeNodePinned} {
				f := testFlock(tt.mod)
				objs, err := Desired(DesiredInput{Flock: f, Mode: mode, Assign: map[int32]string{0: "n1"}})
				if err != nil {
					t.Fatal(err)
				}
				sts := objs[1].(*appsv1.StatefulSet)
				if sts.Spec.PodManagementPolicy != tt.policy || !equality.Semantic.DeepEqual(sts.Spec.UpdateStrategy, tt.strategy) {
					t.Errorf("%s: policy %s, strategy %+v; want %s, %+v", mode, sts.Spec.PodManagementPolicy, sts.Spec.UpdateStrategy, tt.policy, tt.strategy)
				}
				if r := sts.Spec.PersistentVolumeClaimRetentionPolicy; r == nil || r.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType || r.WhenScaled != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
					t.Errorf("%s: claim retention %+v, want Retain for both", mode, r)
				}
				var pdb *policyv1.PodDisruptionBudget
				for _, o := range objs {
					if p, ok := o.(*policyv1.PodDisruptionBudget); ok {
						pdb = p
					}
				}
				switch {
				case tt.budget == nil && pdb != nil:
					t.Errorf("%s: a budget %+v, want none", mode, pdb.Spec)
				case tt.budget != nil && pdb == nil:
					t.Errorf("%s: no budget, want %+v", mode, tt.budget)
				case tt.budget != nil:
					want := tt.budget.DeepCopy()
					want.Selector = &metav1.LabelSelector{MatchLabels: SelectorLabels(f)}
					if !equality.Semantic.DeepEqual(pdb.Spec, *want) || pdb.Name != f.Name || pdb.Namespace != f.Namespace || len(pdb.OwnerReferences) != 1 || !*pdb.OwnerReferences[0].Controller {
						t.Errorf("%s: budget %s/%s %+v owners %v; want %+v, named and controlled by the Flock", mode, pdb.Namespace, pdb.Name, pdb.Spec, pdb.OwnerReferences, *want)
					}
				}
			}
		})
	}
}
