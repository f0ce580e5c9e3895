// Command hostdir-provisioner is the local cluster's volume provisioner: a
// claim of its StorageClass, once the scheduler picked the real node, gets a
// directory made here, by this process, on the machine that is the real
// node, and a hostPath PersistentVolume pinned to that node; a released
// volume's directory is removed. It replaces rancher's local-path-provisioner,
// whose helper pod per claim cost 9 s (p50) on every OrderedReady step of the
// campaign. The claim and volume bookkeeping (selected node, binding,
// provisioned-by, reclaim, retries) is sig-storage-lib-external-provisioner's.
//
// Built by "flock-cluster build" as a component; not part of the main module.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster")
	name := flag.String("provisioner-name", "", "provisioner name of the StorageClass")
	node := flag.String("node", "", "the node this machine is (kubernetes.io/hostname)")
	dir := flag.String("dir", "", "directory the volumes are made in")
	flag.Parse()
	for f, v := range map[string]string{"kubeconfig": *kubeconfig, "provisioner-name": *name, "node": *node, "dir": *dir} {
		if v == "" {
			fmt.Fprintf(os.Stderr, "-%s is required\n", f)
			os.Exit(2)
		}
	}
	if err := run(*kubeconfig, *name, &hostDirs{node: *node, dir: filepath.Clean(*dir)}); err != nil {
		slog.Error("hostdir-provisioner failed", "err", err)
		os.Exit(1)
	}
}

func run(kubeconfig, name string, p *hostDirs) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return fmt.Errorf("volumes dir: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background())
	slog.Info("hostdir-provisioner started", "provisioner", name, "node", p.node, "dir", p.dir)
	// One process per cluster: no leader election.
	controller.NewProvisionController(ctx, cs, name, p, controller.LeaderElection(false)).Run(ctx)
	return nil
}

// hostDirs makes and removes volume directories under dir, on node.
type hostDirs struct {
	node, dir string
}

// Provision makes the claim's directory, writable by any user as
// local-path's was (pods run as non-root users), and returns its volume.
func (p *hostDirs) Provision(_ context.Context, o controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	if o.SelectedNodeName != p.node {
		return nil, controller.ProvisioningFinished, fmt.Errorf("volumes exist only on node %s, not on %q", p.node, o.SelectedNodeName)
	}
	path := filepath.Join(p.dir, o.PVName+"_"+o.PVC.Namespace+"_"+o.PVC.Name)
	if err := os.Mkdir(path, 0o777); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, controller.ProvisioningFinished, fmt.Errorf("make %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o777); err != nil { // the umask took some bits
		return nil, controller.ProvisioningFinished, fmt.Errorf("chmod %s: %w", path, err)
	}
	reclaim := corev1.PersistentVolumeReclaimDelete
	if o.StorageClass.ReclaimPolicy != nil {
		reclaim = *o.StorageClass.ReclaimPolicy
	}
	slog.Info("volume provisioned", "pv", o.PVName, "claim", o.PVC.Namespace+"/"+o.PVC.Name, "path", path)
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: o.PVName},
		Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: reclaim,
			AccessModes:                   o.PVC.Spec.AccessModes,
			VolumeMode:                    o.PVC.Spec.VolumeMode,
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: o.PVC.Spec.Resources.Requests[corev1.ResourceStorage]},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: path, Type: new(corev1.HostPathDirectory)},
			},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{p.node}}},
			}}}},
		},
	}, controller.ProvisioningFinished, nil
}

// Delete removes the volume's directory; a path outside dir is refused, not
// removed.
func (p *hostDirs) Delete(_ context.Context, pv *corev1.PersistentVolume) error {
	if pv.Spec.HostPath == nil {
		return &controller.IgnoredError{Reason: "not a hostPath volume"}
	}
	path := filepath.Clean(pv.Spec.HostPath.Path)
	if filepath.Dir(path) != p.dir || !strings.HasPrefix(filepath.Base(path), pv.Name+"_") {
		return fmt.Errorf("volume %s: path %s is not one of %s", pv.Name, path, p.dir)
	}
	if err := os.RemoveAll(path); err != nil {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	slog.Info("volume deleted", "pv", pv.Name, "path", path)
	return nil
}
