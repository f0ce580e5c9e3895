package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// StorageClass is the local cluster's default StorageClass: directories on
// the real node, provisioned by rancher's local-path-provisioner, which runs
// on this machine with the node's helper pods.
const StorageClass = "local-path"

const (
	storageNamespace   = "local-path-storage"
	storageProvisioner = "rancher.io/local-path"
)

// startStorage sets up the StorageClass and starts the provisioner. Its
// volumes live in the node dir and go with the cluster.
func startStorage(ctx context.Context, s *State, cs kubernetes.Interface, start func(name string, args ...string) error) error {
	n := s.RealNode
	volumes := filepath.Join(n.Dir, "volumes")
	if err := os.MkdirAll(volumes, 0o755); err != nil {
		return fmt.Errorf("create volumes dir: %w", err)
	}
	config := fmt.Sprintf(`{"nodePathMap": [{"node": %q, "paths": [%q]}]}`, n.Name, volumes)
	// The helper pod runs the setup and teardown scripts on the node, as
	// root because the directories belong to root; it uses peer-finder's
	// image, which has a shell.
	helperPod := `apiVersion: v1
kind: Pod
metadata:
  name: helper-pod
spec:
  securityContext: {runAsUser: 0, runAsGroup: 0}
  containers:
  - name: helper-pod
    image: ghcr.io/flockd/peer-finder:dev
    imagePullPolicy: Never
`
	for name, content := range map[string]string{"local-path-config.json": config, "local-path-helper-pod.yaml": helperPod} {
		if err := os.WriteFile(filepath.Join(n.Dir, name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	objects := []func() error{
		func() error {
			_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: storageNamespace}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.CoreV1().ServiceAccounts(storageNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "local-path-provisioner"}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.CoreV1().ConfigMaps(storageNamespace).Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: "local-path-config"},
				Data: map[string]string{
					"config.json":    config,
					"helperPod.yaml": helperPod,
					"setup":          "#!/bin/sh\nset -eu\nmkdir -m 0777 -p \"$VOL_DIR\"\n",
					"teardown":       "#!/bin/sh\nset -eu\nrm -rf \"$VOL_DIR\"\n",
				},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
				ObjectMeta: metav1.ObjectMeta{
					Name:        StorageClass,
					Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"},
				},
				Provisioner:       storageProvisioner,
				ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
				VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
				// Volumes exist only on the real node, so pods that need one
				// are scheduled there (and stay Pending on simulated nodes).
				AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
					{Key: RealNodeLabel, Values: []string{"true"}},
				}}},
			}, metav1.CreateOptions{})
			return err
		},
	}
	for _, create := range objects {
		if err := create(); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("storage: %w", err)
		}
	}
	return start("local-path-provisioner", "--debug", "start",
		"--config="+filepath.Join(n.Dir, "local-path-config.json"),
		"--helper-pod-file="+filepath.Join(n.Dir, "local-path-helper-pod.yaml"),
		"--kubeconfig="+filepath.Join(s.StateDir, "config", "local-path-provisioner.kubeconfig"),
		"--namespace="+storageNamespace,
		"--service-account-name=local-path-provisioner",
		"--configmap-name=local-path-config",
		"--provisioner-name="+storageProvisioner,
	)
}
