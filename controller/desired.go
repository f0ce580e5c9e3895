package controller

import (
	"fmt"
	"hash/fnv"
	"maps"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flockv1 "github.com/flockd/flock/api/v1alpha1"
)

// hostnameLabel is the node label local volumes are pinned by.
const hostnameLabel = "kubernetes.io/hostname"

// DesiredInput is everything Desired computes the objects from.
type DesiredInput struct {
	// Flock is the resource, with defaults applied by the API server.
	Flock *flockv1.Flock
	// Mode is the storage mode in effect: NetworkStorage or NodePinned.
	Mode flockv1.Mode
	// Assign maps active members to their nodes (NodePinned mode).
	Assign map[int32]string
	// Hostnames maps node names to their kubernetes.io/hostname label;
	// a node missing here is assumed to use its name.
	Hostnames map[string]string
}

// Desired returns the objects a Flock consists of: the governing headless
// Service, the StatefulSet, the PodDisruptionBudget when the Flock asks for
// one and, in NodePinned mode, one PersistentVolume per placed active
// member and volume. It is pure: no I/O, no clock. The
// namespaced objects carry a controller owner reference to the Flock; the
// volumes carry none, so nothing ever garbage-collects data.
func Desired(in DesiredInput) ([]client.Object, error) {
	f := in.Flock
	objs := []client.Object{service(f), nil}
	var claims []corev1.PersistentVolumeClaim
	switch in.Mode {
	case flockv1.ModeNetworkStorage:
		for _, c := range f.Spec.Storage.VolumeClaimTemplates {
			claims = append(claims, *c.DeepCopy())
		}
	case flockv1.ModeNodePinned:
		local := localStorage(f)
		for _, vol := range local.Volumes {
			claims = append(claims, localClaimTemplate(f, vol, *local.Size))
		}
		for _, o := range sortedKeys(in.Assign) {
			if o >= replicas(f) {
				continue
			}
			host := in.Hostnames[in.Assign[o]]
			if host == "" {
				host = in.Assign[o]
			}
			for _, vol := range local.Volumes {
				objs = append(objs, localVolume(f, local, vol, o, in.Assign[o], host))
			}
		}
	default:
		return nil, fmt.Errorf("flock %s/%s: mode %q cannot be materialized", f.Namespace, f.Name, in.Mode)
	}
	sts := statefulSet(f, claims)
	if in.Mode == flockv1.ModeNetworkStorage {
		spread(&sts.Spec.Template.Spec, SelectorLabels(f))
	}
	objs[1] = sts
	if pdb := disruptionBudget(f); pdb != nil {
		objs = append(objs, pdb)
	}
	return objs, nil
}

// PodManagementPolicy is the StatefulSet's policy for f: the Flock's,
// Parallel when unset.
func PodManagementPolicy(f *flockv1.Flock) appsv1.PodManagementPolicyType {
	if f.Spec.PodManagementPolicy == appsv1.OrderedReadyPodManagement {
		return appsv1.OrderedReadyPodManagement
	}
	return appsv1.ParallelPodManagement
}

// defaultNodeLossAfter is spec.nodeLoss.after when unset.
const defaultNodeLossAfter = 10 * time.Minute

// NodeLossRuleOf is f's spec.nodeLoss with defaults applied: nil unless
// the policy is Reassign.
func NodeLossRuleOf(f *flockv1.Flock) *NodeLossRule {
	nl := f.Spec.NodeLoss
	if nl == nil || nl.Policy != flockv1.NodeLossReassign {
		return nil
	}
	r := &NodeLossRule{After: defaultNodeLossAfter, Quorum: replicas(f)/2 + 1}
	if nl.After != nil {
		r.After = max(nl.After.Duration, 0)
	}
	if nl.Quorum != nil {
		r.Quorum = *nl.Quorum
	}
	return r
}

func updateStrategy(f *flockv1.Flock) appsv1.StatefulSetUpdateStrategy {
	u := f.Spec.UpdateStrategy
	if u.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
	}
	s := appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}
	if u.RollingUpdate != nil && u.RollingUpdate.Partition != nil {
		s.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To(*u.RollingUpdate.Partition)}
	}
	return s
}

// disruptionBudget is the Flock's PodDisruptionBudget, nil when it asks
// for none.
func disruptionBudget(f *flockv1.Flock) *policyv1.PodDisruptionBudget {
	b := f.Spec.PodDisruptionBudget
	if b == nil {
		return nil
	}
	spec := policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: SelectorLabels(f)}}
	switch {
	case b.MinAvailable != nil:
		spec.MinAvailable = ptr.To(*b.MinAvailable)
	case b.MaxUnavailable != nil:
		spec.MaxUnavailable = ptr.To(*b.MaxUnavailable)
	default:
		spec.MaxUnavailable = ptr.To(intstr.FromInt32(1))
	}
	return &policyv1.PodDisruptionBudget{
		TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            f.Name,
			Namespace:       f.Namespace,
			Labels:          SelectorLabels(f),
			OwnerReferences: ownerRef(f),
		},
		Spec: spec,
	}
}

// ServiceName is the name of the Flock's governing Service.
func ServiceName(f *flockv1.Flock) string {
	if f.Spec.ServiceName != "" {
		return f.Spec.ServiceName
	}
	return f.Name
}

// ClaimName is the name of member ordinal's claim for a volume, as the
// StatefulSet controller names it.
func ClaimName(f *flockv1.Flock, volume string, ordinal int32) string {
	return fmt.Sprintf("%s-%s-%d", volume, f.Name, ordinal)
}

// VolumeName is the name of the PersistentVolume holding member ordinal's
// volume on node. It depends on the node so that a reassigned member gets a
// new volume and the old one, with its data, stays.
func VolumeName(f *flockv1.Flock, volume string, ordinal int32, node string) string {
	h := fnv.New32a()
	h.Write([]byte(node))
	return fmt.Sprintf("flock.%s.%s.%s-%d.%08x", f.Namespace, f.Name, volume, ordinal, h.Sum32())
}

// SelectorLabels are the labels selecting a Flock's pods.
func SelectorLabels(f *flockv1.Flock) map[string]string {
	return map[string]string{flockv1.FlockLabel: f.Name}
}

func replicas(f *flockv1.Flock) int32 {
	return ptr.Deref(f.Spec.Replicas, 1)
}

func ownerRef(f *flockv1.Flock) []metav1.OwnerReference {
	return []metav1.OwnerReference{{
		APIVersion:         flockv1.GroupVersion.String(),
		Kind:               "Flock",
		Name:               f.Name,
		UID:                f.UID,
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}}
}

func service(f *flockv1.Flock) *corev1.Service {
	ports := make([]corev1.ServicePort, len(f.Spec.Ports))
	for i, p := range f.Spec.Ports {
		p.DeepCopyInto(&ports[i])
		if ports[i].Protocol == "" {
			ports[i].Protocol = corev1.ProtocolTCP
		}
		if ports[i].TargetPort.IntValue() == 0 && ports[i].TargetPort.StrVal == "" {
			ports[i].TargetPort = intstr.FromInt32(p.Port) // what the API server defaults
		}
	}
	return &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            ServiceName(f),
			Namespace:       f.Namespace,
			Labels:          SelectorLabels(f),
			OwnerReferences: ownerRef(f),
		},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 SelectorLabels(f),
			Ports:                    ports,
		},
	}
}

func statefulSet(f *flockv1.Flock, claims []corev1.PersistentVolumeClaim) *appsv1.StatefulSet {
	tmpl := f.Spec.Template.DeepCopy()
	tmpl.Labels = merged(tmpl.Labels, SelectorLabels(f))
	if len(f.Spec.NodeSelector) > 0 {
		tmpl.Spec.NodeSelector = merged(tmpl.Spec.NodeSelector, f.Spec.NodeSelector)
	}
	tmpl.Spec.Tolerations = append(tmpl.Spec.Tolerations, f.Spec.Tolerations...)
	return &appsv1.StatefulSet{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            f.Name,
			Namespace:       f.Namespace,
			Labels:          SelectorLabels(f),
			OwnerReferences: ownerRef(f),
		},
		Spec: appsv1.StatefulSetSpec{
			Replicas:             ptr.To(replicas(f)),
			Selector:             &metav1.LabelSelector{MatchLabels: SelectorLabels(f)},
			Template:             *tmpl,
			VolumeClaimTemplates: claims,
			ServiceName:          ServiceName(f),
			PodManagementPolicy:  PodManagementPolicy(f),
			UpdateStrategy:       updateStrategy(f),
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			},
		},
	}
}

// localStorage returns the local storage settings with defaults filled in
// (the API server defaults them too; this keeps Desired total).
func localStorage(f *flockv1.Flock) flockv1.LocalStorage {
	var l flockv1.LocalStorage
	if f.Spec.Storage.Local != nil {
		l = *f.Spec.Storage.Local.DeepCopy()
	}
	if l.Path == "" {
		l.Path = "/var/lib/flock"
	}
	if l.Size == nil || l.Size.IsZero() {
		l.Size = ptr.To(resource.MustParse("1Gi"))
	}
	if len(l.Volumes) == 0 {
		l.Volumes = []string{"data"}
	}
	if l.Source == "" {
		l.Source = flockv1.LocalVolumeHostPath
	}
	return l
}

func volumeLabels(f *flockv1.Flock, volume string) map[string]string {
	return map[string]string{
		flockv1.FlockLabel:     f.Name,
		flockv1.NamespaceLabel: f.Namespace,
		flockv1.VolumeLabel:    volume,
	}
}

// localClaimTemplate is the claim template of a node-pinned volume: no
// StorageClass (so no provisioner and no default class) and a selector that
// only matches this Flock's volumes.
func localClaimTemplate(f *flockv1.Flock, volume string, size resource.Quantity) corev1.PersistentVolumeClaim {
	return corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: volume, Labels: SelectorLabels(f)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(""),
			Selector:         &metav1.LabelSelector{MatchLabels: volumeLabels(f, volume)},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
}

// localVolume is member ordinal's volume on node: pinned there by node
// affinity and pre-bound to the member's claim, so the scheduler can place
// the member nowhere else.
func localVolume(f *flockv1.Flock, l flockv1.LocalStorage, volume string, ordinal int32, node, hostname string) *corev1.PersistentVolume {
	path := fmt.Sprintf("%s/%s/%s/%s-%d", l.Path, f.Namespace, f.Name, volume, ordinal)
	var src corev1.PersistentVolumeSource
	if l.Source == flockv1.LocalVolumeLocal {
		src.Local = &corev1.LocalVolumeSource{Path: path}
	} else {
		src.HostPath = &corev1.HostPathVolumeSource{Path: path, Type: ptr.To(corev1.HostPathDirectoryOrCreate)}
	}
	lbls := volumeLabels(f, volume)
	lbls[flockv1.MemberLabel] = strconv.Itoa(int(ordinal))
	return &corev1.PersistentVolume{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        VolumeName(f, volume, ordinal, node),
			Labels:      lbls,
			Annotations: map[string]string{nodeAnnotation: node},
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: *l.Size},
			PersistentVolumeSource:        src,
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              "",
			ClaimRef: &corev1.ObjectReference{
				APIVersion: "v1",
				Kind:       "PersistentVolumeClaim",
				Namespace:  f.Namespace,
				Name:       ClaimName(f, volume, ordinal),
			},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: hostnameLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{hostname},
				}}}},
			}},
		},
	}
}

// spread adds soft spreading of a Flock's members to its pod spec in
// NetworkStorage mode (NodePinned places one member per node through the
// volumes): a preferred pod anti-affinity on the node's hostname and a
// ScheduleAnyway topology spread over zones. Both are preferences, so a
// Flock with more members than nodes or zones still schedules. A template
// that sets any pod anti-affinity or topology spread constraint of its own
// decides spreading itself and gets neither; other affinity (node affinity,
// pod affinity) is kept as the user wrote it.
func spread(ps *corev1.PodSpec, sel map[string]string) {
	if len(ps.TopologySpreadConstraints) > 0 || (ps.Affinity != nil && ps.Affinity.PodAntiAffinity != nil) {
		return
	}
	if ps.Affinity == nil {
		ps.Affinity = &corev1.Affinity{}
	}
	ps.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 100,
			PodAffinityTerm: corev1.PodAffinityTerm{
				LabelSelector: &metav1.LabelSelector{MatchLabels: maps.Clone(sel)},
				TopologyKey:   hostnameLabel,
			},
		}},
	}
	ps.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew:           1,
		TopologyKey:       zoneLabel,
		WhenUnsatisfiable: corev1.ScheduleAnyway,
		LabelSelector:     &metav1.LabelSelector{MatchLabels: maps.Clone(sel)},
	}}
}

// nodeAnnotation records on a PersistentVolume the name of the node it is
// pinned to (its node affinity names the hostname label, which may differ).
const nodeAnnotation = "flockd.io/node"

func merged(a, b map[string]string) map[string]string {
	out := make(map[string]string, len(a)+len(b))
	maps.Copy(out, a)
	maps.Copy(out, b)
	return out
}
