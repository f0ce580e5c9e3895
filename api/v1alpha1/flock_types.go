package v1alpha1

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Mode says where a Flock keeps its members' data.
// +kubebuilder:validation:Enum=NetworkStorage;NodePinned;Auto
type Mode string

const (
	// ModeNetworkStorage keeps data on volumes provisioned from the
	// Flock's volumeClaimTemplates; members may run on any eligible node.
	ModeNetworkStorage Mode = "NetworkStorage"
	// ModeNodePinned keeps data in a directory on a node; member i is
	// pinned to the node recorded in status.members[i].node.
	ModeNodePinned Mode = "NodePinned"
	// ModeAuto chooses NetworkStorage when the cluster has a default
	// StorageClass and NodePinned otherwise. The choice is made once and
	// recorded in status.mode.
	ModeAuto Mode = "Auto"
)

// LocalVolumeSource says which kind of PersistentVolume holds a member's
// node-local data.
// +kubebuilder:validation:Enum=HostPath;Local
type LocalVolumeSource string

const (
	// LocalVolumeHostPath uses a hostPath volume of type DirectoryOrCreate:
	// the kubelet creates the directory on first use.
	LocalVolumeHostPath LocalVolumeSource = "HostPath"
	// LocalVolumeLocal uses a "local" volume: the directory (typically a
	// mounted disk) must exist on the node before the member starts.
	LocalVolumeLocal LocalVolumeSource = "Local"
)

// Annotations understood by the controller.
const (
	// ReassignAnnotation is the explicit user action that moves members to
	// other nodes in NodePinned mode. Its value is a comma-separated list of
	// entries "<ordinal>=<node>" (move the member to that node) or
	// "<ordinal>" (move the member to any free eligible node, only if its
	// node is gone or no longer eligible at the time the controller reads
	// the entry). It is a one-time request, never a standing order: the
	// controller removes each entry once it has started the move or refused
	// it (a ReassignRefused Event says why). Moves run one at a time: while
	// a member moves, the other entries stay in the annotation and start
	// when the moving member is Ready on its new node. The member starts
	// with empty data on the new node; the data on the old node stays there:
	// its PersistentVolume is released, not deleted.
	ReassignAnnotation = "flockd.io/reassign"
	// ReassignParallelAnnotation set to "true" starts all entries of
	// ReassignAnnotation at once instead of one at a time. It is removed
	// together with the last entry.
	ReassignParallelAnnotation = "flockd.io/reassign-parallel"
)

// Labels the controller puts on the objects it makes.
const (
	// FlockLabel holds the Flock's name on pods, services and volumes.
	FlockLabel = "flockd.io/flock"
	// NamespaceLabel holds the Flock's namespace on PersistentVolumes,
	// which are cluster-scoped.
	NamespaceLabel = "flockd.io/namespace"
	// MemberLabel holds the member ordinal on PersistentVolumes.
	MemberLabel = "flockd.io/member"
	// VolumeLabel holds the volume name on PersistentVolumes.
	VolumeLabel = "flockd.io/volume"
)

// FlockSpec is the desired state of a Flock.
// +kubebuilder:validation:XValidation:rule="has(self.serviceName) == has(oldSelf.serviceName) && (!has(self.serviceName) || self.serviceName == oldSelf.serviceName)",message="serviceName is immutable"
// +kubebuilder:validation:XValidation:rule="(has(self.storage) && has(self.storage.local)) == (has(oldSelf.storage) && has(oldSelf.storage.local))",message="storage.local is immutable: it cannot be added or removed"
// +kubebuilder:validation:XValidation:rule="has(self.template.spec) && size(self.template.spec.containers) > 0",message="template.spec.containers must not be empty"
// +kubebuilder:validation:XValidation:rule="!has(self.template.spec) || !has(self.template.spec.nodeName)",message="template.spec.nodeName is not allowed: it would bypass placement"
type FlockSpec struct {
	// Replicas is the number of members. Members are named <flock>-0 ..
	// <flock>-(replicas-1); scaling down removes the highest ordinals and
	// keeps their data.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Template is the pod template of every member. Its containers mount
	// the storage volumes by name. It needs at least one container and
	// must not set nodeName (placement decides the node).
	// In NetworkStorage mode, when the template sets no podAntiAffinity and
	// no topologySpreadConstraints of its own, the controller adds soft
	// spreading of the members: a preferred pod anti-affinity per node
	// (kubernetes.io/hostname) and a ScheduleAnyway topology spread over
	// zones (topology.kubernetes.io/zone). A template that sets either
	// decides spreading itself and gets neither. NodePinned mode spreads
	// members one per node through their volumes.
	Template corev1.PodTemplateSpec `json:"template"`

	// ServiceName is the name of the headless governing Service, which
	// gives member i the DNS name <flock>-<i>.<serviceName>.<namespace>.svc.<domain>.
	// Defaults to the Flock's name. Immutable.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	ServiceName string `json:"serviceName,omitempty"`

	// Ports are the ports of the governing Service; they name the SRV
	// records of the members.
	// +listType=map
	// +listMapKey=port
	// +listMapKey=protocol
	// +optional
	Ports []corev1.ServicePort `json:"ports,omitempty"`

	// Mode says where members keep their data. Immutable. Auto without
	// volumeClaimTemplates is NodePinned, with or without a default
	// StorageClass.
	// +kubebuilder:default=Auto
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="mode is immutable"
	// +optional
	Mode Mode `json:"mode,omitempty"`

	// Storage describes the members' persistent volumes. Immutable: the
	// API server rejects changes to storage.local, and a changed
	// volumeClaimTemplates is refused by the StatefulSet (Degraded).
	// +optional
	Storage Storage `json:"storage,omitempty"`

	// NodeSelector restricts the nodes members may run on. In NodePinned
	// mode, it also picks the nodes members are pinned to. Keys must be
	// valid label keys (a bad value is refused by the StatefulSet: Degraded).
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$') && (!k.contains('/') || size(k.split('/')[0]) <= 253))",message="nodeSelector keys must be valid label keys"
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Tolerations let members run on tainted nodes; in NodePinned mode a
	// node is eligible only if its NoSchedule and NoExecute taints are
	// tolerated.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// PodManagementPolicy is the StatefulSet's: Parallel (the default)
	// creates and deletes members without waiting for the others;
	// OrderedReady creates member i only once members 0..i-1 are Running
	// and Ready, and removes them in reverse order. With OrderedReady one
	// member that cannot start holds back every higher ordinal: in
	// NodePinned mode a member waiting for its node (gone, cordoned,
	// tainted) keeps the members after it from being re-created, and an
	// application whose readiness needs a quorum never gets past its first
	// members. Choose it only for applications that must start one by one
	// and become Ready alone. The field is immutable on a StatefulSet:
	// changing it makes the controller delete the StatefulSet, orphaning
	// its pods, and create it again with the new policy; it adopts the
	// running pods (StatefulSetReplaced Event).
	// +kubebuilder:validation:Enum=Parallel;OrderedReady
	// +kubebuilder:default=Parallel
	// +optional
	PodManagementPolicy appsv1.PodManagementPolicyType `json:"podManagementPolicy,omitempty"`

	// UpdateStrategy is the StatefulSet's: RollingUpdate (the default)
	// replaces members from the highest ordinal down, one at a time, each
	// once the one before is Ready; rollingUpdate.partition keeps the
	// members below it on the old template (a canary). OnDelete replaces a
	// member only when its pod is deleted. Either way, the members keep
	// their names and data.
	// +kubebuilder:validation:XValidation:rule="!has(self.rollingUpdate) || !has(self.type) || self.type == 'RollingUpdate'",message="rollingUpdate is only allowed with type RollingUpdate"
	// +kubebuilder:default={type: RollingUpdate}
	// +optional
	UpdateStrategy UpdateStrategy `json:"updateStrategy,omitempty"`

	// PodDisruptionBudget, when set, makes the controller keep a
	// PodDisruptionBudget named after the Flock over its members, so that
	// voluntary disruptions (node drains) leave a quorum running. Removing
	// it removes the budget.
	// +optional
	PodDisruptionBudget *PodDisruptionBudget `json:"podDisruptionBudget,omitempty"`

	// NodeLoss says what happens in NodePinned mode to a member whose node
	// is lost (not Ready, or deleted). Without it, or with policy Wait, the
	// member waits for its node however long that takes.
	// +optional
	NodeLoss *NodeLoss `json:"nodeLoss,omitempty"`
}

// NodeLossPolicy is what the controller does with a member whose node is lost.
// +kubebuilder:validation:Enum=Wait;Reassign
type NodeLossPolicy string

const (
	// NodeLossWait keeps the member waiting for its node, where its data is.
	NodeLossWait NodeLossPolicy = "Wait"
	// NodeLossReassign moves the member to a healthy node with a fresh,
	// empty volume once its node has been lost for longer than After. The
	// member's local copy stays on the lost node and is not used again;
	// the application's own replication must rebuild it (an etcd or
	// ZooKeeper member rejoins and catches up from the others).
	NodeLossReassign NodeLossPolicy = "Reassign"
)

// NodeLoss is the node-loss policy of a NodePinned Flock. Under Reassign,
// moves are cautious: one member at a time, only while no other member is
// moving and every other active member is Ready, and only when at least
// Quorum members are Ready. With two nodes lost at once nothing moves: an
// operator decides (flockd.io/reassign).
type NodeLoss struct {
	// Policy is Wait (the default) or Reassign.
	// +kubebuilder:default=Wait
	// +optional
	Policy NodeLossPolicy `json:"policy,omitempty"`
	// After is how long a member must have waited for its lost node
	// before it is moved (Reassign only). A node goes NotReady some 40s
	// after its kubelet stops reporting; After counts from then.
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="after must not be negative"
	// +optional
	After *metav1.Duration `json:"after,omitempty"`
	// Quorum is how many members, not counting the one to move, must be
	// Ready for a move to start. Defaults to a majority of replicas
	// (replicas/2 + 1): with 3 members, the 2 others; with 2 members, no
	// move (the survivor alone has no quorum).
	// +kubebuilder:validation:Minimum=0
	// +optional
	Quorum *int32 `json:"quorum,omitempty"`
}

// UpdateStrategy says how the members' pods are replaced when the template
// changes.
type UpdateStrategy struct {
	// Type is RollingUpdate or OnDelete.
	// +kubebuilder:validation:Enum=RollingUpdate;OnDelete
	// +kubebuilder:default=RollingUpdate
	// +optional
	Type appsv1.StatefulSetUpdateStrategyType `json:"type,omitempty"`
	// RollingUpdate tunes the RollingUpdate type.
	// +optional
	RollingUpdate *RollingUpdate `json:"rollingUpdate,omitempty"`
}

// RollingUpdate tunes a rolling update.
type RollingUpdate struct {
	// Partition: members with an ordinal at or above it are updated, the
	// others keep the old template until it is lowered. 0 updates all.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Partition *int32 `json:"partition,omitempty"`
}

// PodDisruptionBudget limits voluntary disruptions of the members. Exactly
// one of minAvailable and maxUnavailable may be set; with neither,
// maxUnavailable is 1.
// +kubebuilder:validation:XValidation:rule="!(has(self.minAvailable) && has(self.maxUnavailable))",message="set minAvailable or maxUnavailable, not both"
type PodDisruptionBudget struct {
	// MinAvailable is the number (or percentage) of members that must stay
	// available, e.g. a quorum: 2 of 3.
	// +kubebuilder:validation:XIntOrString
	// +optional
	MinAvailable *intstr.IntOrString `json:"minAvailable,omitempty"`
	// MaxUnavailable is the number (or percentage) of members that may be
	// unavailable at once.
	// +kubebuilder:validation:XIntOrString
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// Storage describes the members' persistent volumes. Data is never
// deleted by the controller: the StatefulSet's
// persistentVolumeClaimRetentionPolicy is always Retain for both
// whenScaled and whenDeleted (not configurable), so scaling down keeps
// the removed members' claims, deleting the Flock keeps every claim, and
// in NodePinned mode the volumes and host directories stay too (they carry
// no owner reference). A member that comes back gets its data again.
type Storage struct {
	// VolumeClaimTemplates are used in NetworkStorage mode: member i gets a
	// claim <template>-<flock>-<i> for each template, as in a StatefulSet.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	VolumeClaimTemplates []corev1.PersistentVolumeClaim `json:"volumeClaimTemplates,omitempty"`

	// Local is used in NodePinned mode. Immutable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="storage.local is immutable"
	// +optional
	Local *LocalStorage `json:"local,omitempty"`
}

// LocalStorage describes node-local volumes: for each volume name, member i
// gets a PersistentVolume on its node at
// <path>/<namespace>/<flock>/<volume>-<i>, pre-bound to the claim
// <volume>-<flock>-<i>.
type LocalStorage struct {
	// Path is the host directory under which members keep their data: an
	// absolute, clean path of one or more segments of letters, digits,
	// ".", "_" and "-" (no segment starting with "."), not "/" and not in
	// a system directory (/bin, /boot, /dev, /etc, /lib, /lib64, /proc,
	// /root, /run, /sbin, /sys, /usr, /var/run). The controller also
	// refuses a path whose Flock directory overlaps another Flock's.
	// +kubebuilder:default="/var/lib/flock"
	// +kubebuilder:validation:Pattern=`^(/[A-Za-z0-9_-][A-Za-z0-9._-]*)+$`
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!['/bin','/boot','/dev','/etc','/lib','/lib64','/proc','/root','/run','/sbin','/sys','/usr','/var/run'].exists(p, self == p || self.startsWith(p + '/'))",message="path must not be in a system directory"
	// +optional
	Path string `json:"path,omitempty"`

	// Size is the capacity recorded on each volume; it must be positive.
	// The kubelet does not enforce it on host directories.
	// +kubebuilder:default="1Gi"
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self)) && quantity(string(self)).isGreaterThan(quantity('0'))",message="size must be positive"
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`

	// Volumes are the names of the volumes each member gets; containers
	// mount them by these names.
	// +kubebuilder:default={data}
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:items:MaxLength=40
	// +listType=set
	// +optional
	Volumes []string `json:"volumes,omitempty"`

	// Source is the kind of PersistentVolume: HostPath (the directory is
	// created on first use) or Local (the directory must exist).
	// +kubebuilder:default=HostPath
	// +optional
	Source LocalVolumeSource `json:"source,omitempty"`
}

// MemberStatus is the observed state of one member.
type MemberStatus struct {
	// Ordinal is the member's index.
	Ordinal int32 `json:"ordinal"`
	// Node is the node the member is pinned to (NodePinned mode) or runs
	// on (NetworkStorage mode). Empty when not yet placed.
	// +optional
	Node string `json:"node,omitempty"`
	// Active is false for members removed by scaling down whose data and
	// node assignment are kept for when they come back.
	Active bool `json:"active"`
	// Ready says whether the member's pod is Ready.
	Ready bool `json:"ready"`
	// Waiting says why the member cannot run, if it cannot.
	// +optional
	Waiting string `json:"waiting,omitempty"`
	// MovingFrom is set while a reassignment of the member (explicit, or
	// by spec.nodeLoss) is under way: the node it leaves (its data stays
	// there). The controller releases the member's claims bound there and
	// deletes its pod (at once, without a grace period, when that node is
	// lost: its kubelet cannot confirm), and
	// clears MovingFrom once the member is Ready on Node.
	// +optional
	MovingFrom string `json:"movingFrom,omitempty"`
	// MoveReason says why the member is moving while MovingFrom is set:
	// Requested (the flockd.io/reassign annotation) or NodeLost
	// (spec.nodeLoss policy Reassign).
	// +optional
	MoveReason string `json:"moveReason,omitempty"`
	// WaitingSince is when the member started waiting for the reason in
	// Waiting (a node lost, gone or not Ready, counts as one reason).
	// +optional
	WaitingSince *metav1.Time `json:"waitingSince,omitempty"`
}

// FlockStatus is the observed state of a Flock.
type FlockStatus struct {
	// ObservedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Mode is the storage mode in effect (Auto resolved).
	// +optional
	Mode Mode `json:"mode,omitempty"`
	// Replicas is the number of member pods that exist.
	Replicas int32 `json:"replicas"`
	// ReadyReplicas is the number of member pods that are Ready.
	ReadyReplicas int32 `json:"readyReplicas"`
	// Selector is the label selector of the member pods (for the scale
	// subresource).
	// +optional
	Selector string `json:"selector,omitempty"`
	// Members lists every member that has a node or data, by ordinal.
	// +listType=map
	// +listMapKey=ordinal
	// +optional
	Members []MemberStatus `json:"members,omitempty"`
	// Conditions are Available, Progressing and Degraded.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Condition types of a Flock.
const (
	// ConditionAvailable is True when all members are Ready.
	ConditionAvailable = "Available"
	// ConditionProgressing is True while members are being created,
	// removed or updated.
	ConditionProgressing = "Progressing"
	// ConditionDegraded is True when a member cannot run: its node is gone
	// or unschedulable, or no eligible node is free.
	ConditionDegraded = "Degraded"
)

// Flock is a set of members with stable names and persistent storage,
// spread one member per node.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=flk
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.status.mode`
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 52",message="name must be at most 52 characters (StatefulSet pod labels)"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="name must be a DNS label starting with a letter (it names the member pods and the default Service)"
type Flock struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state.
	Spec FlockSpec `json:"spec"`
	// Status is the observed state.
	// +optional
	Status FlockStatus `json:"status,omitempty"`
}

// FlockList is a list of Flocks.
//
// +kubebuilder:object:root=true
type FlockList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the Flocks.
	Items []Flock `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Flock{}, &FlockList{})
}
