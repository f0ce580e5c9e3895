package localcluster

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// StorageClass is the local cluster's default StorageClass: node-local
// directories of the real nodes (below NodeVolumesDir on each), made and
// removed by hostdir-provisioner (a component built from
// hack/components/hostdir-provisioner), which runs on this machine and needs
// no pod to do it.
const StorageClass = "local-path"

// storageProvisioner is the StorageClass's provisioner name.
const storageProvisioner = "flockd.io/hostdir"

// provisionerProc is the provisioner's name in State.Procs.
const provisionerProc = "hostdir-provisioner"

// startStorage sets up the StorageClass and starts the provisioner. Its
// volumes live in the nodes' dirs and go with the cluster.
func startStorage(ctx context.Context, s *State, cs kubernetes.Interface, bins map[string]string, start startFunc) error {
	_, err := cs.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:        StorageClass,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"},
		},
		Provisioner:       storageProvisioner,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
		// Volumes exist only on the real nodes, so pods that need one
		// are scheduled there (and stay Pending on simulated nodes).
		AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
			{Key: RealNodeLabel, Values: []string{"true"}},
		}}},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("storage class: %w", err)
	}
	args := []string{
		"-kubeconfig=" + filepath.Join(s.StateDir, "config", "hostdir-provisioner.kubeconfig"),
		"-provisioner-name=" + storageProvisioner, "-path=" + NodeVolumesDir,
	}
	for _, n := range s.RealNodes {
		args = append(args, n.provisionerArg())
	}
	return start(provisionerProc, bins["hostdir-provisioner"], args...)
}

// provisionerArg is the provisioner's argument that makes it serve n.
func (n *RealNode) provisionerArg() string {
	return "-node=" + n.Name + "=" + n.HostPath(NodeVolumesDir)
}

// serveVolumes restarts the provisioner with n among its nodes.
func (s *State) serveVolumes(n *RealNode) error {
	p := s.proc(provisionerProc)
	if err := p.stop(10 * time.Second); err != nil {
		return fmt.Errorf("restart %s: %w", provisionerProc, err)
	}
	if arg := n.provisionerArg(); !slices.Contains(p.Args, arg) {
		p.Args = append(p.Args, arg)
	}
	return s.restartProc(provisionerProc)
}
